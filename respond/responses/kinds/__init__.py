"""Output-item kinds, one module each, and the registry the run looks them up in.

A kind is how one type of output item streams (an `Item`: opened, fed the deltas it
takes, closed, executed when respond runs it), how its input items replay into the
model's context, and how its request tool is echoed in `response.tools`. The
EventBuilder asks `Kinds.opening(delta)` which item a delta opens and knows no kind by
name; adding a kind is one module here, its wire types in protocol/, and a line below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import OutputItem
from respond.protocol.tools import Tool
from respond.responses.hosted_call import HostedTool
from respond.responses.kinds import (
    apply_patch_call,
    code_interpreter_call,
    compaction,
    computer_call,
    custom_tool_call,
    file_search_call,
    function_call,
    local_shell_call,
    mcp_call,
    message,
    namespace,
    reasoning,
    shell_call,
    tool_search_call,
    web_search_call,
)
from respond.responses.kinds._base import Item, Kind, Replay, ReplayItem, Shared, Shown, Status

__all__ = [
    "KINDS",
    "Item",
    "Kind",
    "Kinds",
    "Replay",
    "Shared",
    "Status",
    "calls_for",
    "hosted_item",
    "echo",
    "replay_of",
    "shown",
]

KINDS: tuple[Kind, ...] = (
    message.KIND,
    reasoning.KIND,
    function_call.KIND,
    custom_tool_call.KIND,
    mcp_call.KIND,
    mcp_call.APPROVAL_KIND,
    mcp_call.LISTING_KIND,
    file_search_call.KIND,
    code_interpreter_call.KIND,
    web_search_call.KIND,
    shell_call.KIND,
    local_shell_call.KIND,
    apply_patch_call.KIND,
    computer_call.KIND,
    tool_search_call.KIND,
    tool_search_call.OUTPUT_KIND,
    namespace.KIND,
    compaction.KIND,
)
_BY_ITEM = {kind.item_type: kind for kind in KINDS if kind.item_type is not None}
_REPLAYS: dict[type, ReplayItem] = {k: v for kind in KINDS for k, v in kind.replays.items()}
_ECHOES = {k: v for kind in KINDS for k, v in kind.echoes.items()}
_SHOWS = {k: v for kind in KINDS for k, v in kind.shows.items()}

_RUNS = {k: v for kind in KINDS for k, v in kind.runs.items()}  # hosted family -> its calls

# A tool call's name -> the item it opens (function_call for any name not here).
CallKinds = Mapping[str, Callable[[d.ToolCallStart], Item[Any]]]


def shown(tool: Tool) -> Shown | None:
    """How the model sees a request tool its kind shows (None: function tools, which the
    run validates itself, hosted tools, and the types respond does not run)."""
    how = _SHOWS.get(type(tool))
    return how(tool) if how is not None else None


def calls_for(
    tools: Iterable[Tool] = (), hosted: Mapping[str, HostedTool] | None = None
) -> dict[str, Callable[[d.ToolCallStart], Item[Any]]]:
    """The item each call opens, by the name the model calls: a custom or shell (...)
    tool's, its kind's item; a hosted tool's, its family's; function_call otherwise."""
    calls: dict[str, Callable[[d.ToolCallStart], Item[Any]]] = {}
    tools = list(tools)
    for tool in tools:
        seen = shown(tool)
        if seen is not None:
            calls[seen.spec.name] = seen.opens
    for member in namespace.Names(tools).members:
        calls[member.visible] = member.opens
    for name, hosted_tool in (hosted or {}).items():
        calls[name] = partial(_hosted_call, hosted_tool)
    return calls


def _hosted_call(tool: HostedTool, start: d.ToolCallStart) -> Item[Any]:
    return hosted_item(tool)


def hosted_item(tool: HostedTool, approval_request_id: str | None = None) -> Item[Any]:
    """The item a call of a hosted tool opens: its family's (`Kind.runs`); one that
    answers an approval request runs, as approved."""
    return _RUNS[tool.family](tool, approval_request_id)


class Kinds:
    """The kinds of one response: which item each delta opens, and what items share."""

    def __init__(
        self,
        calls: CallKinds | None = None,
        *,
        seal_reasoning: Callable[[str], str] | None = None,
        reasoning_events: ev.ReasoningEvents = "openai",
    ) -> None:
        self.calls = dict(calls or {})
        self.shared = Shared(
            seal_reasoning=seal_reasoning, openai_reasoning=reasoning_events == "openai"
        )

    def opening(self, delta: d.Delta) -> Item[Any]:
        """The item a delta opens when the open item (if any) does not take it."""
        if isinstance(delta, d.TextDelta):
            return message.Message()
        if isinstance(delta, d.ReasoningDelta):
            return reasoning.Reasoning()
        assert isinstance(delta, d.ToolCallStart), "arguments outside a call"
        make = self.calls.get(delta.name, function_call.FunctionCall.start)
        return make(delta)

    def resumed(self, item: OutputItem) -> Item[Any] | None:
        """The item a stored stream left open, to continue (None: it is not open)."""
        kind = _BY_ITEM.get(item.type)
        if kind is None or kind.resume is None:
            return None
        if getattr(item, "status", None) in ("completed", "incomplete", "failed"):
            return None
        return kind.resume(item)


def replay_of(item: object) -> ReplayItem | None:
    """How an input item replays into the model's context (None: it does not)."""
    return _REPLAYS.get(type(item))


def echo(tool: Tool) -> dict[str, Any] | None:
    """A request tool as `response.tools` echoes it (None: not echoed)."""
    how = _ECHOES.get(type(tool))
    return how(tool) if how is not None else None
