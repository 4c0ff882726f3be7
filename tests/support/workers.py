"""How pytest workers share the suite: `make test PYTEST_WORKERS=N` (pytest-xdist, `--dist
loadfile`), for a machine with cores to spare.

- A file's tests go to one worker, one after another, so a module's fixture (a server, an
  upstream, nginx) starts once, as without workers.
- The files marked `sandbox` (`pytestmark`: their tests run code in respond's sandbox, or
  count the machine's sandboxed processes, sandbox uids and call cgroups) all go to one worker,
  one after another: the counts are the machine's, so a call on another worker would show.
- Files are dealt out in the order collected (`--no-loadscope-reorder`): tests/clients, whose
  few tests take longest, first; the many short unit tests last, to fill the end.

The controller deals out test ids before any worker has collected, so it reads the mark from
each file's module-level `pytestmark`; a worker refuses a test marked `sandbox` on its own
(the file would not be in the group). xdist's own `loadgroup` cannot be used: it renames test
ids in a way pytest 9 no longer takes.

Each worker has its own session fixtures (`server`) and its own processes; what a worker finds
at its end (processes left running, reads beside the checkout) is reported by the controller
(tests/conftest.py).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

__all__ = ["FilesAndSandbox"]


class FilesAndSandbox(LoadFileScheduling):  # type: ignore[misc]  # xdist has no types
    """`--dist loadfile`, with every file that uses the `sandbox` mark as one unit."""

    # xdist's scheduler API is its classes: pytest-xdist is pinned in pyproject.toml.
    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        return "sandbox" if _marks_sandbox(self.config.rootpath / file) else file


@cache
def _marks_sandbox(path: Path) -> bool:
    """The module's `pytestmark` (one mark or a list) holds `pytest.mark.sandbox`."""
    assigned = [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.Assign)]
    for node in assigned:
        if [ast.unparse(target) for target in node.targets] == ["pytestmark"]:
            return "pytest.mark.sandbox" in ast.unparse(node.value)
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("sandbox") and not _marks_sandbox(item.path):
            raise pytest.UsageError(
                f"{item.nodeid}: mark the whole file sandbox (pytestmark = pytest.mark.sandbox);"
                " workers group files (tests/support/workers.py)"
            )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FilesAndSandbox | None:
    return FilesAndSandbox(config, log) if config.getvalue("dist") == "loadfile" else None
