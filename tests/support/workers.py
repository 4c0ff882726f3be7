"""Two pytest workers share `make test` (pytest-xdist: `-n 2 --dist loadfile`).

Much of the suite waits (a client program starting, a server loading, a timeout running out),
so a second worker uses the CPU the first leaves idle. How the tests are dealt out:

- a file's tests go to one worker, one after another, so a module's fixture (a server, an
  upstream, nginx) starts once, as without workers;
- the files that use the `sandbox` mark (their tests run code in respond's sandbox, or count
  the machine's sandboxed processes, sandbox uids and call cgroups) all go to one worker, one
  after another: the counts are the machine's, so a sandbox call on the other worker would
  show in them.

The controller deals out test ids before any worker has collected, so it reads the mark from
each file's text: a file that names it anywhere is in the group. (xdist's own `loadgroup`
cannot be used: it renames test ids in a way pytest 9 no longer takes.)

Each worker has its own session fixtures (`server`) and its own processes; what a worker finds
at its end (processes left running, reads beside the checkout) is reported by the controller
(tests/conftest.py).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

__all__ = ["FilesAndSandbox"]

MARK = "pytest.mark.sandbox"


class FilesAndSandbox(LoadFileScheduling):  # type: ignore[misc]  # xdist has no types
    """`--dist loadfile`, with every file that uses the `sandbox` mark as one unit."""

    # xdist's scheduler API is its classes: pytest-xdist is pinned in pyproject.toml.
    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        return "sandbox" if _uses_mark(self.config.rootpath / file) else file


@cache
def _uses_mark(path: Path) -> bool:
    return MARK in path.read_text()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FilesAndSandbox | None:
    return FilesAndSandbox(config, log) if config.getvalue("dist") == "loadfile" else None
