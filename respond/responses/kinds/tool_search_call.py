"""`tool_search_call` and `tool_search_output`: a search of the request's deferred tools
(`defer_loading: true`, which the model does not see until a search loads them).

The model sees a function `tool_search(query)` (a client-executed search may give its own
`description` and `parameters`). Executed by the client (`execution: "client"`), a call is
added and done as one `tool_search_call` the client answers with a `tool_search_output`
listing the tools it loads. Executed by respond (the default), the call stays pending
until the run has searched (hosted/tool_search.py), then a `tool_search_output` item
follows it with the tools found. Either way the loaded tools are shown to the model from
then on (responses/deferred.py), and both items replay as the call and its result."""

from __future__ import annotations

import json
from typing import Any

from respond import _model_json as model_json
from respond.engines._base import FunctionSpec, ToolCall
from respond.protocol import events as ev
from respond.protocol.items import ToolSearchCallItem, ToolSearchOutputItem
from respond.protocol.requests import ToolSearchCallInput, ToolSearchOutputInput
from respond.protocol.tools import CustomTool, FunctionTool, McpTool, NamespaceTool, ToolSearchTool
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds._base import Item, Kind, LateCall, QuietCall, Replay, Shown, Status

__all__ = [
    "DESCRIPTION",
    "KIND",
    "NAME",
    "OUTPUT_KIND",
    "PARAMETERS",
    "ClientSearch",
    "ServerSearch",
    "SearchOutput",
    "arguments_of",
    "for_tool",
    "loaded_text",
    "spec",
]

NAME = "tool_search"
DESCRIPTION = (
    "Find more tools: search the tools that are not loaded yet by what they do. The tools "
    "found can be called after the search."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "What the tool needed does, in a few words",
            "minLength": 1,
            "maxLength": 100,
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}
_STATE = "tool_search"  # Replay.state: the id of the last search respond ran


def spec(tool: ToolSearchTool) -> FunctionSpec:
    """The function the model sees (a client's own description and parameters, if any)."""
    return FunctionSpec(
        name=NAME,
        description=tool.description or DESCRIPTION,
        parameters=tool.parameters or PARAMETERS,
        # The client's parameters are its own schema, as a non-strict function's are.
        strict=tool.parameters is None,
    )


def arguments_of(text: str) -> dict[str, Any]:
    """A call's arguments as the item carries them (an object; {} when they do not parse)."""
    try:
        arguments = model_json.loads(text)
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


class ClientSearch(LateCall[ToolSearchCallItem]):
    """A search the client runs: added and done once its arguments are known."""

    prefix = "tsc"

    def item(self, arguments: dict[str, Any]) -> ToolSearchCallItem:
        return ToolSearchCallItem(
            id=self.item_id, call_id=self.call_id, arguments=arguments, execution="client"
        )


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> ServerSearch:
    return ServerSearch()


class ServerSearch(QuietCall[ToolSearchCallItem]):
    """A search respond runs: pending from its end until searched, then followed by the
    `tool_search_output` of what it found."""

    prefix = "tsc"

    def added(self) -> tuple[ToolSearchCallItem, list[ev.Event]]:
        return ToolSearchCallItem(id=self.item_id), []

    def close(self, item: ToolSearchCallItem, status: Status) -> list[ev.Event]:
        if status != "completed":
            return self.done(item, status)
        self.pending = True
        return []

    def executed(self, item: ToolSearchCallItem, result: CallResult) -> list[ev.Event]:
        item.arguments = arguments_of(self.arguments)
        return self.done(item, "completed")

    def follows(self, result: CallResult) -> Item[Any] | None:
        return SearchOutput(list(result.tools))


class SearchOutput(Item[ToolSearchOutputItem]):
    """The tools a search respond ran loaded (added and done at once)."""

    prefix = "tso"

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools

    def added(self) -> tuple[ToolSearchOutputItem, list[ev.Event]]:
        return ToolSearchOutputItem(id=self.item_id, tools=self.tools), []

    def close(self, item: ToolSearchOutputItem, status: Status) -> list[ev.Event]:
        return self.done(item, status)


def _resume(item: ToolSearchCallItem) -> Item[Any] | None:
    # A client's search is added only once complete; a server's continues pending.
    return ServerSearch() if item.execution == "server" else None


def _replay(item: ToolSearchCallInput, replay: Replay, where: str) -> None:
    call_id = item.call_id or item.id or NAME
    if item.execution == "server":
        replay.state[_STATE] = call_id  # its output names no call: it answers this one
    arguments = json.dumps(item.arguments or {}, ensure_ascii=False)
    replay.call(ToolCall(call_id=call_id, name=NAME, arguments=arguments))


def _replay_output(item: ToolSearchOutputInput, replay: Replay, where: str) -> None:
    call_id = item.call_id or replay.state.pop(_STATE, None) or NAME
    replay.result(call_id, loaded_text(_loaded_names(item, replay)))


def _loaded_names(item: ToolSearchOutputInput, replay: Replay) -> list[str]:
    """The names the model calls the tools a search loaded by."""
    names = []
    for tool in item.tools:
        if isinstance(tool, NamespaceTool):
            names += [replay.namespaced(tool.name, member.name) for member in tool.tools]
        elif isinstance(tool, FunctionTool | CustomTool):
            names.append(tool.name)
        elif isinstance(tool, McpTool) and isinstance(tool.allowed_tools, list):
            names += [replay.hosted_names(tool.server_label, name) for name in tool.allowed_tools]
        elif isinstance(tool, McpTool):  # a whole server: named by its label
            names.append(str(tool.server_label))
    return names


def loaded_text(names: list[str]) -> str:
    """What the model reads of a search's result: the names of the tools it loaded."""
    if not names:
        return "No tools found."
    return "Loaded these tools, which can be called now: " + ", ".join(names) + "."


def _shown(tool: ToolSearchTool) -> Shown | None:
    if tool.execution != "client":
        return None  # respond runs it: a hosted tool (hosted/tool_search.py)
    # OpenAI's tool_choice has no type that forces a search ("required" does).
    return Shown(spec=spec(tool), opens=ClientSearch.start)


def _echo(tool: ToolSearchTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="tool_search_call",
    resume=_resume,
    replays={ToolSearchCallInput: _replay, ToolSearchOutputInput: _replay_output},
    echoes={ToolSearchTool: _echo},
    shows={ToolSearchTool: _shown},
    runs={"tool_search": for_tool},
)
OUTPUT_KIND = Kind(item_type="tool_search_output")
