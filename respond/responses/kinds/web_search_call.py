"""`web_search_call`: a web search, or a page opened or searched, that respond runs for the
model. Added and in progress; searching once its arguments are known (the call's end);
done when the run has searched, with OpenAI's `action` (`search` with its query, and its
`sources` when the request includes them; `open_page` with its URL; `find_in_page` with
its URL and pattern). The pages found are cited where the answer names them. It replays as
the function call the model made and what it read, as far as the item kept it."""

from __future__ import annotations

import json
from typing import Any

from respond import _model_json as model_json
from respond.engines._base import ToolCall
from respond.protocol import events as ev
from respond.protocol.items import WebSearchCallItem
from respond.protocol.requests import WebSearchCallInput
from respond.protocol.tools import WebSearchTool
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds._base import Kind, QuietCall, Replay, Status

__all__ = ["FIND", "KIND", "OPEN", "SEARCH", "WebSearchCall", "for_tool"]

# The functions the model sees, and the action type each call is.
SEARCH, OPEN, FIND = "web_search", "open_page", "find_in_page"
ACTIONS = {SEARCH: "search", OPEN: "open_page", FIND: "find_in_page"}
_ARGUMENTS = {"search": ("query",), "open_page": ("url",), "find_in_page": ("url", "pattern")}


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> WebSearchCall:
    return WebSearchCall(ACTIONS[tool.name])


class WebSearchCall(QuietCall[WebSearchCallItem]):
    """Its arguments are read at its end, into the action."""

    prefix = "ws"

    def __init__(self, action: str) -> None:
        self.action: dict[str, Any] = {"type": action, **dict.fromkeys(_ARGUMENTS[action], "")}

    def added(self) -> tuple[WebSearchCallItem, list[ev.Event]]:
        item = WebSearchCallItem(id=self.item_id, action=dict(self.action))
        return item, [ev.WebSearchCallInProgress(**self.ids())]

    def close(self, item: WebSearchCallItem, status: Status) -> list[ev.Event]:
        try:
            arguments = model_json.loads(self.arguments)
        except ValueError:
            arguments = {}
        for name in _ARGUMENTS[self.action["type"]]:
            value = arguments.get(name) if isinstance(arguments, dict) else None
            self.action[name] = value if isinstance(value, str) else ""
        if status != "completed":
            item.action = dict(self.action)
            return self.done(item, status)
        self.pending = True  # the run searches, then the item is done
        return [ev.WebSearchCallSearching(**self.ids())]

    def executed(self, item: WebSearchCallItem, result: CallResult) -> list[ev.Event]:
        item.action = dict(self.action)
        if result.results is not None and self.action["type"] == "search":
            item.action["sources"] = result.results
        for url, title in result.found:
            self.shared.linked.setdefault(url, title)
        if result.error is not None:
            return self.done(item, "failed")
        return [ev.WebSearchCallCompleted(**self.ids()), *self.done(item, "completed")]

    def unfinished(self, item: WebSearchCallItem, status: Status) -> list[ev.Event]:
        item.action = dict(self.action)
        return self.done(item, status)


def _resume(item: WebSearchCallItem) -> WebSearchCall:
    return WebSearchCall(str(item.action.get("type", "search")))


def _replay(item: WebSearchCallInput, replay: Replay, where: str) -> None:
    """The call as the model made it and what it read: a search's sources when the item kept
    them (`include: ["web_search_call.action.sources"]`); a page's text is not kept."""
    action = item.action or {}
    kind = action.get("type", "search")
    name = {v: k for k, v in ACTIONS.items()}.get(kind, SEARCH)
    arguments = {key: action.get(key, "") for key in _ARGUMENTS.get(kind, ("query",))}
    replay.call(ToolCall(call_id=item.id, name=name, arguments=json.dumps(arguments)))
    sources = action.get("sources")
    if kind == "search" and isinstance(sources, list) and sources:
        urls = [str(s.get("url")) for s in sources if isinstance(s, dict)]
        text = "Results found (their text was not kept):\n" + "\n".join(urls)
    else:
        text = "(What this call read was not kept.)"
    replay.result(item.id, text)


def _echo(tool: WebSearchTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="web_search_call",
    resume=_resume,
    replays={WebSearchCallInput: _replay},
    echoes={WebSearchTool: _echo},
    runs={"web_search": for_tool},
)
