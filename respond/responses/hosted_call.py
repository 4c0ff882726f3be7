"""A hosted call as both sides see it: the families that run it (hosted/) and the kinds
whose items stream it (kinds/). A leaf: it imports neither folder, so they need not import
each other.

`HostedTool` is one tool respond runs, as the model sees it (a function); its `family`
names the item kind its calls become (a kind's `runs`, kinds/__init__.py); its `executor`
runs a call into a `CallResult`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from respond.engines._base import FunctionSpec

__all__ = ["CallResult", "Executor", "HostedTool", "result_text", "sanitized", "visible_names"]


@dataclass(frozen=True)
class CallResult:
    """What a call produced: its output text, or an error object (OpenAI's shapes)."""

    output: str | None = None
    error: dict[str, Any] | None = None
    # file_search: the chunks found (the item's `results`, when the request includes them),
    # and the (file id, file name) of each file they came from, which the answer cites.
    # web_search: the sources of a search (its action's, when the request includes them),
    # and the (URL, title) of each page found or opened, which the answer cites.
    results: list[dict[str, Any]] | None = None
    found: tuple[tuple[str, str], ...] = ()
    # tool_search: the tools it loaded, as the request gave them (the tool_search_output's
    # `tools`), and the functions the model sees for them from the next turn on.
    tools: tuple[dict[str, Any], ...] = ()
    shown: tuple[FunctionSpec, ...] = ()
    # code_interpreter: the call's outputs (the item's `outputs`, when the request includes
    # them), whether the sandbox stopped it (the item fails), and the (container id, file
    # id, path) of each file it wrote, which the answer cites. The hosted shell: its
    # commands' output chunks (its shell_call_output's), and the files they wrote.
    outputs: list[dict[str, Any]] | None = None
    stopped: bool = False
    written: tuple[tuple[str, str, str], ...] = ()


class Executor(Protocol):
    """Runs the calls of one server's tools. Cancellation (anyio) must stop a call."""

    async def call(self, name: str, arguments: str) -> CallResult: ...


@dataclass(frozen=True)
class HostedTool:
    """One hosted tool, as the model sees it (a function named `visible`)."""

    visible: str
    server_label: str
    name: str  # the tool's own name on its server
    description: str | None
    parameters: Mapping[str, Any]
    needs_approval: bool
    executor: Executor = field(compare=False, repr=False)
    # The family whose item a call becomes: the name a kind `runs` (`mcp`, `file_search`,
    # `tool_search`, `code_interpreter`, `shell`, `web_search`).
    family: str = "mcp"
    container_id: str | None = None  # code_interpreter, shell: the container calls run in
    # A deferred MCP server's tool no search has loaded yet: how a search lists it
    # (hosted/_mcp_deferred.py). Not shown to the model until then.
    deferred: Mapping[str, Any] | None = field(default=None, compare=False)

    def spec(self, strict: bool) -> FunctionSpec:
        return FunctionSpec(
            name=self.visible,
            description=self.description,
            parameters=self.parameters,
            strict=strict,
        )


def result_text(output: str | None, error: Any) -> str:
    """What the model reads of a hosted call: its output, or what went wrong."""
    if error is None:
        return output or ""
    if isinstance(error, dict):
        content = error.get("content")
        texts = [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]
        message = " ".join(texts) or str(error.get("message", ""))
    else:
        message = str(error)
    return f"Error: {message or 'the call failed'}"


_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def sanitized(name: str) -> str:
    """`name` as a function name an engine accepts."""
    return _INVALID.sub("_", name)[:64] or "tool"


def visible_names(
    tools: Sequence[tuple[str, str]], taken: Sequence[str]
) -> dict[tuple[str, str], str]:
    """A function name for each (server_label, tool name), unambiguous across servers and
    against the request's own function names (`taken`): the tool's own name where that is
    unique, else `label__name`."""
    counts: dict[str, int] = {}
    for _, name in tools:
        counts[sanitized(name)] = counts.get(sanitized(name), 0) + 1
    reserved = set(taken)
    names: dict[tuple[str, str], str] = {}
    for label, name in tools:
        plain = sanitized(name)
        if counts[plain] == 1 and plain not in reserved:
            names[(label, name)] = plain
        else:
            names[(label, name)] = sanitized(f"{label}__{name}")
    return names
