"""Text extraction in a child process, with a time cap.

Reading a file is CPU-bound Python (pypdf above all): in a thread of the server it would
hold the GIL that every request needs, and a 3 KB PDF could cost a minute of it (#32). So
each file is read by a fresh `python -I respond/files/_extract.py` (isolated: no site dir,
no working directory on the path, none of the server's imports), niced, with an address
space limit, and killed when it runs past the time cap. A fresh process per file costs
~0.1 s, nothing next to embedding the text, and leaves nothing behind after a bad file.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from respond.files import _extract
from respond.files._extract import ExtractionError

__all__ = ["ExtractLimits", "extract_in_worker"]

SCRIPT = Path(_extract.__file__)


@dataclass(frozen=True)
class ExtractLimits:
    """What one file may cost to read (docs/files.md#extraction-limits)."""

    timeout: float = 60.0  # wall-clock seconds per file
    max_pages: int = _extract.MAX_PAGES
    max_chars: int = _extract.MAX_CHARS


async def extract_in_worker(filename: str, content: bytes, limits: ExtractLimits) -> str:
    """The file's text; raises ExtractionError (the file's `last_error`) when it cannot be
    read or a limit is hit."""
    argv = [str(limits.max_pages), str(limits.max_chars)]
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", str(SCRIPT), filename, *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(child.communicate(content), limits.timeout)
    except TimeoutError:
        raise ExtractionError(
            "invalid_file",
            f"Reading '{filename}' took longer than {limits.timeout:g}s, the most this server "
            "spends on one file (--extract-timeout).",
        ) from None
    finally:
        if child.returncode is None:  # timed out, or this task was cancelled
            child.kill()
            await child.wait()
    try:
        answer = json.loads(out)
    except ValueError:  # killed by its memory limit, or crashed
        raise ExtractionError(
            "invalid_file",
            f"'{filename}' could not be read (the reader exited {child.returncode}).",
        ) from None
    if "error" in answer:
        raise ExtractionError(answer["error"]["code"], answer["error"]["message"])
    text: str = answer["text"]
    return text
