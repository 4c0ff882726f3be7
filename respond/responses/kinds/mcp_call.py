"""The MCP family's items: `mcp_list_tools` (a server's listing), `mcp_call` (a call respond
runs) and `mcp_approval_request` (a call the client must approve first); how they replay:
each call (or request) as the function call the model made, its output, error or refusal
as the tool result that answers it; and the `mcp` tool's echo, without its secrets."""

from __future__ import annotations

from typing import Any

from respond.engines import _base as d
from respond.engines._base import ToolCall
from respond.protocol import events as ev
from respond.protocol.items import McpApprovalRequestItem, McpCallItem, McpListToolsItem
from respond.protocol.requests import (
    McpApprovalRequestInput,
    McpApprovalResponseInput,
    McpCallInput,
    McpListToolsInput,
)
from respond.protocol.tools import McpTool
from respond.responses.hosted_call import CallResult, HostedTool, result_text
from respond.responses.kinds._base import Item, Kind, QuietCall, Replay, Status

__all__ = [
    "APPROVAL_KIND",
    "KIND",
    "LISTING_KIND",
    "McpApprovalRequest",
    "McpCall",
    "McpListing",
    "for_tool",
]


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> Item[Any]:
    """A call of an MCP tool: run by respond, unless it needs the client's approval first
    (and is not approved yet)."""
    if tool.needs_approval and approval_request_id is None:
        return McpApprovalRequest(tool.server_label, tool.name)
    return McpCall(tool.server_label, tool.name, approval_request_id)


class McpCall(Item[McpCallItem]):
    """Added and in progress; its arguments stream; closed, it waits for the run."""

    prefix = "mcp"

    def __init__(self, label: str, name: str, approval_request_id: str | None = None) -> None:
        self.label, self.name = label, name
        self.approval_request_id = approval_request_id

    def added(self) -> tuple[McpCallItem, list[ev.Event]]:
        item = McpCallItem(
            id=self.item_id,
            server_label=self.label,
            name=self.name,
            approval_request_id=self.approval_request_id,
        )
        return item, [ev.McpCallInProgress(**self.ids())]

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.ToolCallArgumentsDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        if not isinstance(delta, d.ToolCallArgumentsDelta):
            return []
        return [ev.McpCallArgumentsDelta(**self.ids(), delta=delta.arguments)]

    def close(self, item: McpCallItem, status: Status) -> list[ev.Event]:
        done = ev.McpCallArgumentsDone(**self.ids(), arguments=item.arguments)
        if status == "completed":  # the run executes it, then the item is done
            self.pending = True
            return [done]
        return [done, *self.done(item, status)]

    def executed(self, item: McpCallItem, result: CallResult) -> list[ev.Event]:
        item.output, item.error = result.output, result.error
        failed = result.error is not None
        ended = (ev.McpCallFailed if failed else ev.McpCallCompleted)(**self.ids())
        return [ended, *self.done(item, "failed" if failed else "completed")]


class McpApprovalRequest(QuietCall[McpApprovalRequestItem]):
    """A call that needs approval: its arguments are known at its end (no delta events)."""

    prefix = "mcpr"

    def __init__(self, label: str, name: str) -> None:
        self.label, self.name = label, name

    def added(self) -> tuple[McpApprovalRequestItem, list[ev.Event]]:
        return McpApprovalRequestItem(id=self.item_id, server_label=self.label, name=self.name), []

    def close(self, item: McpApprovalRequestItem, status: Status) -> list[ev.Event]:
        item.arguments = self.arguments
        return self.done(item, None)  # the item has no status


class McpListing(Item[McpListToolsItem]):
    """A server's listing, added and done at once (before the run's first turn)."""

    prefix = "mcpl"

    def __init__(self, listing: McpListToolsItem) -> None:
        self.listing = listing

    def added(self) -> tuple[McpListToolsItem, list[ev.Event]]:
        item = self.listing.model_copy(update={"id": self.item_id, "tools": []})
        ended = (
            ev.McpListToolsFailed if self.listing.error is not None else ev.McpListToolsCompleted
        )
        return item, [ev.McpListToolsInProgress(**self.ids()), ended(**self.ids())]

    def close(self, item: McpListToolsItem, status: Status) -> list[ev.Event]:
        return self.done(self.listing.model_copy(update={"id": self.item_id}), None)


def _resume_call(item: McpCallItem) -> McpCall:
    return McpCall(item.server_label, item.name, item.approval_request_id)


def _resume_request(item: McpApprovalRequestItem) -> McpApprovalRequest:
    return McpApprovalRequest(item.server_label, item.name)


# ------------------------------------------------------------ replay

_NOT_APPROVED = "This call was not approved; it was not run."


def _approved(replay: Replay) -> set[str]:
    """Approved requests whose mcp_call (which answers them) is still to come."""
    approved: set[str] = replay.state.setdefault("mcp_approved", set())
    return approved


def _call(replay: Replay, call_id: str, label: str, name: str, arguments: str) -> None:
    replay.call(
        ToolCall(call_id=call_id, name=replay.hosted_names(label, name), arguments=arguments)
    )


def _replay_call(item: McpCallInput, replay: Replay, where: str) -> None:
    text = result_text(item.output, item.error)
    request = item.approval_request_id
    if request is not None and request in _approved(replay):
        _approved(replay).discard(request)
        replay.result(request, text)
        return
    _call(replay, item.id, item.server_label, item.name, item.arguments)
    replay.result(item.id, text)


def _replay_request(item: McpApprovalRequestInput, replay: Replay, where: str) -> None:
    replay.unanswered[item.id] = _NOT_APPROVED
    _call(replay, item.id, item.server_label, item.name, item.arguments)


def _replay_response(item: McpApprovalResponseInput, replay: Replay, where: str) -> None:
    request = item.approval_request_id
    if replay.unanswered.pop(request, None) is None:
        return
    if item.approve:
        _approved(replay).add(request)  # the mcp_call that ran it (or runs it now) answers it
        return
    reason = f" Reason: {item.reason}" if item.reason else ""
    replay.result(request, f"The user refused this call; it was not run.{reason}")


def _replay_listing(item: McpListToolsInput, replay: Replay, where: str) -> None:
    """What the model sees of a listing is its tools, not a message."""


# ------------------------------------------------------------ echo

# What the response echoes of an mcp tool: never headers or authorization.
_ECHOED = ("server_label", "server_url", "connector_id", "server_description")


def echo_mcp_tool(tool: McpTool) -> dict[str, Any]:
    """The mcp tool as the response shows it: without headers or authorization.

    A `connector_id` naming a server the operator configured is left out: OpenAI's types
    allow only OpenAI's own connector names there, and the client sent it, so knows it."""
    sent = tool.model_dump(exclude_none=True)
    echoed: dict[str, Any] = {"type": "mcp"}
    echoed.update({key: sent[key] for key in _ECHOED if key in sent})
    if not str(echoed.get("connector_id", "connector_")).startswith("connector_"):
        del echoed["connector_id"]
    echoed["allowed_tools"] = tool.allowed_tools
    echoed["require_approval"] = tool.require_approval or "always"
    return echoed


KIND = Kind(
    item_type="mcp_call",
    resume=_resume_call,
    replays={McpCallInput: _replay_call},
    echoes={McpTool: echo_mcp_tool},
    runs={"mcp": for_tool},
)
APPROVAL_KIND = Kind(
    item_type="mcp_approval_request",
    resume=_resume_request,
    replays={McpApprovalRequestInput: _replay_request, McpApprovalResponseInput: _replay_response},
)
LISTING_KIND = Kind(item_type="mcp_list_tools", replays={McpListToolsInput: _replay_listing})
