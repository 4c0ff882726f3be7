"""The public surface, pinned against what the packages really hold.

As httpx's tests/test_exported_members.py does: `__all__` must be exactly the public
names a module defines or imports, so a name cannot become public by accident (an import
left at module level) nor be listed without existing. On top of that, every respond type
an engine author meets in the seam's signatures must be importable from respond.engines.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

import respond
import respond.engines
import respond.testing

PUBLIC_MODULES = [respond, respond.engines, respond.testing]
# Dunder names a package exports on purpose.
EXPORTED_DUNDERS = {"__version__"}


def public_members(module: types.ModuleType) -> list[str]:
    """The names `module` holds that look public, leaving out its submodules."""
    return sorted(
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name in EXPORTED_DUNDERS)
        and not isinstance(value, types.ModuleType)
    )


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_all_public_members_are_exported(module: types.ModuleType) -> None:
    assert sorted(module.__all__) == public_members(module)
    assert len(set(module.__all__)) == len(module.__all__)  # each name listed once


def test_the_package_re_exports_the_engine_seam() -> None:
    for name in respond.engines.__all__:
        assert getattr(respond, name) is getattr(respond.engines, name), name


def _types_in(hint: Any) -> Iterator[type]:
    """The classes a type hint mentions: X, X | Y, AsyncGenerator[X, None], ..."""
    if isinstance(hint, type):
        yield hint
    for argument in typing.get_args(hint):
        yield from _types_in(argument)


def _hints_of(cls: type) -> Iterator[Any]:
    """The annotations of a class's fields and of its public methods and properties."""
    yield from typing.get_type_hints(cls).values()
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function):
            yield from typing.get_type_hints(function).values()


def test_every_type_the_seam_mentions_is_public() -> None:
    exported = {getattr(respond.engines, name) for name in respond.engines.__all__}
    seen: set[type] = set()
    todo: list[type] = [respond.engines.Engine]
    while todo:
        for hint in _hints_of(todo.pop()):
            for cls in _types_in(hint):
                if cls.__module__.startswith("respond.") and cls not in seen:
                    seen.add(cls)
                    todo.append(cls)
    # The walk reaches the turn, the deltas and what they hold; a new type added to the
    # seam without an export fails here.
    assert {respond.engines.ChatTurn, respond.engines.ModelInfo, respond.engines.Usage} <= seen
    assert seen <= exported, sorted(cls.__name__ for cls in seen - exported)


def test_the_test_engines_are_named_as_fakes() -> None:
    members = [getattr(respond.testing, name) for name in respond.testing.__all__]
    engines = [m for m in members if isinstance(m, type) and issubclass(m, respond.engines.Engine)]
    assert sorted(engine.__name__ for engine in engines) == ["FakeEngine", "ScriptedEngine"]
    for engine in engines:
        assert "FAKE" in (engine.__doc__ or ""), engine.__name__


# What `respond serve` imports to build a server of the bundled model (respond/_server.py).
SERVE_IMPORTS = "respond.cli, respond._server, respond._registry, respond._parts, respond.app"


def test_starting_respond_imports_only_what_its_models_and_tools_need() -> None:
    """The mcp client package (a quarter of respond's import time) is loaded at the first MCP
    tool (hosted/mcp.py), huggingface_hub (a tenth) when -hf fetches a model
    (_hub_download.py), the upstream engines (and jsonschema) when a model is an upstream's
    (_registry.py): not by every `respond` command and every start of a local model."""
    found = subprocess.run(
        [sys.executable, "-c", f"import sys, {SERVE_IMPORTS}; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'respond.responses.hosted.mcp'" in found  # the family itself is loaded
    assert "'mcp'" not in found and "'mcp_types'" not in found
    assert "'respond._hub'" in found  # the flags' own checks
    assert "'huggingface_hub'" not in found and "'tqdm'" not in found
    assert "'respond.engines.upstream'" not in found and "'jsonschema'" not in found
