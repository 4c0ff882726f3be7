"""Catch the test process reading beside the checkout (a clone has nothing there).

A sibling of the checkout (a shared folder, another project) exists on a developer's machine
and not in a fresh clone, so a test that reads one passes here and fails there. conftest.py installs
`record` as an audit hook for the whole session and fails the run if `reads` is not empty at the
end. Hidden folders beside the checkout (a home directory's `.cache`, `.local`) are where tools
keep their caches on purpose, and are allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["CHECKOUT", "beside_checkout", "reads", "record"]

CHECKOUT = Path(__file__).resolve().parents[2]
_PARENT = CHECKOUT.parent
_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})

reads: list[str] = []


def beside_checkout(path: str | os.PathLike[str]) -> bool:
    """`path` lies in a non-hidden sibling of the checkout (or is a file next to it)."""
    if Path(_PARENT.anchor) == _PARENT:
        return False  # a checkout at the top of the filesystem has the whole system beside it
    full = Path(os.path.abspath(path))
    try:
        relative = full.relative_to(_PARENT)
    except ValueError:
        return False
    first = relative.parts[0] if relative.parts else ""
    return first not in ("", CHECKOUT.name) and not first.startswith(".")


def record(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if isinstance(path, str | os.PathLike) and beside_checkout(path):
        reads.append(os.fspath(path))
