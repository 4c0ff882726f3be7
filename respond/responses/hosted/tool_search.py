"""The tool_search family: respond searching the request's deferred tools itself.

A `{"type": "tool_search"}` tool (execution "server", the default) becomes one hosted tool
the model sees as the function `tool_search(query)`. A call ranks the deferred tools not
loaded yet (responses/deferred.py; a deferred MCP server's, hosted/_mcp_deferred.py) by
BM25 over their names and descriptions (and their namespace's or server's), loads the best
few, and the run shows them to the model from its next turn
on; the call is a `tool_search_call` item followed by a `tool_search_output` listing them
(responses/kinds/tool_search_call.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from respond import _model_json as model_json
from respond.protocol.errors import APIError
from respond.protocol.tools import Tool, ToolSearchTool
from respond.responses.hosted._base import Hosted, refuse_named_function
from respond.responses.hosted._bm25 import rank
from respond.responses.hosted._toolset import Deferred, Request
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds.tool_search_call import (
    DESCRIPTION,
    NAME,
    PARAMETERS,
    loaded_text,
)

__all__ = ["MAX_LOADED", "ToolSearch"]

MAX_LOADED = 3  # tools one search loads: the best matches, not the whole catalogue
# A deferred tool's group (a namespace, a deferred MCP server): its name and description
# keys, which a search matches and the search's description names.
_GROUP = {"namespace": ("name", "description"), "mcp": ("server_label", "server_description")}


def _text(entry: Deferred) -> str:
    """What a search matches: a deferred tool's name and description, and its group's."""
    parts = [entry.spec.name, entry.spec.description or ""]
    group = _GROUP.get(str(entry.wire.get("type")))
    parts += [str(entry.wire.get(key) or "") for key in group or ()]
    return " ".join(parts)


class ToolSearch:
    """The tool_search family: needs nothing but the request and the other families."""

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The request's tool_search tool that respond runs (nothing when it has none, or
        the client runs it), over the request's deferred functions and the deferred tools
        the families before it offer. OpenAI's tool_choice has no type that forces it;
        "required" does when it is the only tool the model sees."""
        deferred = [*request.deferred()]
        deferred += [
            Deferred(spec, dict(wire)) for spec, wire in offered.searchable(request.enforceable)
        ]
        return Hosted(tools=_hosted_search(request.body.tools, deferred))


def _hosted_search(tools: Sequence[Tool], deferred: Sequence[Deferred]) -> dict[str, HostedTool]:
    found = [(i, t) for i, t in enumerate(tools) if isinstance(t, ToolSearchTool)]
    if len(found) > 1:
        raise APIError(400, "Give at most one tool_search tool.", param=f"tools[{found[1][0]}]")
    if not found or found[0][1].execution == "client":
        return {}
    where = f"tools[{found[0][0]}]"
    refuse_named_function(tools, NAME, "tool_search", where)
    tool = HostedTool(
        visible=NAME,
        server_label=NAME,
        name=NAME,
        description=_described(deferred),
        parameters=PARAMETERS,
        needs_approval=False,
        executor=_Search(list(deferred)),
        family="tool_search",
    )
    return {NAME: tool}


def _described(deferred: Sequence[Deferred]) -> str:
    """The search's description: what can be found, as OpenAI shows searchable tools up
    front (a deferred function's name and description; a namespace's, not its members');
    only the parameters wait for the search."""
    lines = {}
    for entry in deferred:
        group = _GROUP.get(str(entry.wire.get("type")))
        if group is not None:
            name, description = (entry.wire.get(key) or "" for key in group)
            lines[str(name)] = f"- {name}: {description}"
        else:
            lines[entry.spec.name] = f"- {entry.spec.name}: {entry.spec.description or ''}"
    if not lines:
        return DESCRIPTION
    return DESCRIPTION + " Searchable:\n" + "\n".join(line.rstrip(": ") for line in lines.values())


class _Search:
    """Searches the deferred tools; each is loaded at most once per response."""

    def __init__(self, deferred: list[Deferred]) -> None:
        self.left = deferred

    async def call(self, name: str, arguments: str) -> CallResult:
        query = _query(arguments)
        best = rank(query, [_text(entry) for entry in self.left])[:MAX_LOADED]
        found = [self.left[i] for i in best]
        self.left = [entry for i, entry in enumerate(self.left) if i not in best]
        return CallResult(
            output=loaded_text([entry.spec.name for entry in found]),
            tools=tuple(entry.wire for entry in found),
            shown=tuple(entry.spec for entry in found),
        )


def _query(arguments: str) -> str:
    """The words searched for: the `query`, or any strings the arguments hold."""
    try:
        value = model_json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, Mapping):
        return " ".join(str(v) for v in value.values() if isinstance(v, str))
    return str(value)
