"""The hosted-tools seam: what a family hands the run, whatever the family."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from respond.engines._base import FunctionSpec
from respond.protocol.items import McpListToolsItem

__all__ = ["Approved", "CallResult", "Executor", "Hosted", "HostedTool", "visible_names"]


@dataclass(frozen=True)
class CallResult:
    """What a call produced: its output text, or an error object (OpenAI's shapes)."""

    output: str | None = None
    error: dict[str, Any] | None = None
    # file_search: the chunks found (the item's `results`, when the request includes them),
    # and the (file id, file name) of each file they came from, which the answer cites.
    results: list[dict[str, Any]] | None = None
    found: tuple[tuple[str, str], ...] = ()
    # tool_search: the tools it loaded, as the request gave them (the tool_search_output's
    # `tools`), and the functions the model sees for them from the next turn on.
    tools: tuple[dict[str, Any], ...] = ()
    shown: tuple[FunctionSpec, ...] = ()
    # code_interpreter: the call's outputs (the item's `outputs`, when the request includes
    # them), whether the sandbox stopped it (the item fails), and the (container id, file
    # id, path) of each file it wrote, which the answer cites.
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
    # Which family's item a call becomes: `mcp_call`, `file_search_call`,
    # `tool_search_call` or `code_interpreter_call`.
    family: str = "mcp"
    container_id: str | None = None  # code_interpreter: the container its calls run in
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


@dataclass(frozen=True)
class Approved:
    """A call the client approved (`mcp_approval_response`), run before the first turn."""

    approval_request_id: str
    tool: HostedTool
    arguments: str


@dataclass
class Hosted:
    """The hosted tools of one run."""

    tools: dict[str, HostedTool] = field(default_factory=dict)  # by visible name
    listings: list[McpListToolsItem] = field(default_factory=list)  # to emit first
    approved: list[Approved] = field(default_factory=list)
    # tool_choice {"type": "mcp", ...}: the visible names the first turn must call.
    forced: tuple[str, ...] | None = None

    def specs(self, enforceable: Callable[[Mapping[str, Any]], bool]) -> list[FunctionSpec]:
        """The functions the model sees. Strict (arguments valid by construction) where the
        engine can enforce the server's schema; otherwise the server judges the arguments
        (an invalid call comes back as an error the model reads)."""
        shown = [tool for tool in self.tools.values() if tool.deferred is None]
        return [tool.spec(enforceable(tool.parameters)) for tool in shown]

    def searchable(
        self, enforceable: Callable[[Mapping[str, Any]], bool]
    ) -> list[tuple[FunctionSpec, Mapping[str, Any]]]:
        """The deferred tools a search may load: the function the model will see, and how
        a search lists it."""
        return [
            (tool.spec(enforceable(tool.parameters)), tool.deferred)
            for tool in self.tools.values()
            if tool.deferred is not None
        ]

    def visible(self, server_label: str, name: str) -> str:
        """The function name the model sees for a server's tool (also in replayed items)."""
        for tool in self.tools.values():
            if tool.server_label == server_label and tool.name == name:
                return tool.visible
        return _sanitize(name)


_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _sanitize(name: str) -> str:
    return _INVALID.sub("_", name)[:64] or "tool"


def visible_names(
    tools: Sequence[tuple[str, str]], taken: Sequence[str]
) -> dict[tuple[str, str], str]:
    """A function name for each (server_label, tool name), unambiguous across servers and
    against the request's own function names (`taken`): the tool's own name where that is
    unique, else `label__name`."""
    counts: dict[str, int] = {}
    for _, name in tools:
        counts[_sanitize(name)] = counts.get(_sanitize(name), 0) + 1
    reserved = set(taken)
    names: dict[tuple[str, str], str] = {}
    for label, name in tools:
        plain = _sanitize(name)
        if counts[plain] == 1 and plain not in reserved:
            names[(label, name)] = plain
        else:
            names[(label, name)] = _sanitize(f"{label}__{name}")
    return names
