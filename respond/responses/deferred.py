"""Deferred tools (`defer_loading: true`): not shown to the model until a search loads them.

A request's function and custom tools, and the members of its namespaces, may be deferred;
a `tool_search` tool is then how the model finds them. Every `tool_search_output` in the
context (the client's, or one respond ran earlier in the conversation) loads the tools it
lists: the request's deferred tools of those names are shown from then on, and the tools
it lists that the request lacks are added to it. A search respond runs inside a response
loads more for its later turns (hosted/tool_search.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from respond.protocol.errors import APIError
from respond.protocol.requests import InputItem, ToolSearchOutputInput
from respond.protocol.tools import CustomTool, FunctionTool, NamespaceTool, Tool, ToolSearchTool
from respond.responses.kinds.namespace import Names

__all__ = ["Loading", "loading"]

# A tool's identity across requests: (its namespace, or None at the top level; its name).
Key = tuple[str | None, str]


@dataclass(frozen=True)
class Loading:
    """Which tools of a request the model sees."""

    tools: list[Tool]  # the request's, then those loaded that it lacks
    # The deferred tools not loaded yet, by the name the model would call them: their
    # definitions as the request gave them (what a tool_search_output lists).
    hidden: dict[str, dict[str, Any]]


def loading(tools: Sequence[Tool], context: Sequence[InputItem]) -> Loading:
    """The tools shown and hidden, given the searches in `context` (in order)."""
    loaded: list[Tool] = [
        tool for item in context if isinstance(item, ToolSearchOutputInput) for tool in item.tools
    ]
    keys = {key for tool in loaded for key in _keys(tool)}
    have = {key for tool in tools for key in _keys(tool)}
    all_tools = [*tools, *_lacking(loaded, have)]
    top = [t for t in tools if isinstance(t, FunctionTool | CustomTool) and t.defer_loading]
    hidden = {t.name: _wire(t) for t in top if (None, t.name) not in keys}
    groups = {tool.name: tool for tool in tools if isinstance(tool, NamespaceTool)}
    for member in Names(all_tools).members:
        key = (member.namespace, member.tool.name)
        if member.tool.defer_loading and key not in keys and member.namespace in groups:
            hidden[member.visible] = _member_wire(groups[member.namespace], member.tool)
    _check_searchable(tools, hidden)
    return Loading(tools=all_tools, hidden=hidden)


def _keys(tool: Tool) -> list[Key]:
    if isinstance(tool, FunctionTool | CustomTool):
        return [(None, tool.name)]
    if isinstance(tool, NamespaceTool):
        return [(tool.name, member.name) for member in tool.tools]
    return []


def _lacking(loaded: Sequence[Tool], have: set[Key]) -> list[Tool]:
    """The loaded tools the request does not have (a client's search may load any)."""
    added: list[Tool] = []
    for tool in loaded:
        if isinstance(tool, NamespaceTool):
            members = [m for m in tool.tools if (tool.name, m.name) not in have]
            if members:
                added.append(tool.model_copy(update={"tools": members}))
        elif any(key not in have for key in _keys(tool)):
            added.append(tool)
        have.update(_keys(tool))
    return added


def _wire(tool: FunctionTool | CustomTool) -> dict[str, Any]:
    wire: dict[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return wire


def _member_wire(group: NamespaceTool, member: FunctionTool | CustomTool) -> dict[str, Any]:
    """A namespace member as a search lists it: in its namespace (whose description
    OpenAI's type requires)."""
    return {
        "type": "namespace",
        "name": group.name,
        "description": group.description or "",
        "tools": [_wire(member)],
    }


def _check_searchable(tools: Sequence[Tool], hidden: dict[str, dict[str, Any]]) -> None:
    """Deferred tools need a tool_search tool: without one they would silently vanish."""
    if not hidden or any(isinstance(tool, ToolSearchTool) for tool in tools):
        return
    raise APIError(
        400,
        "Tools with defer_loading are shown to the model only once a tool search loads "
        "them: add a {'type': 'tool_search'} tool, or drop defer_loading.",
        param="tools",
        code="invalid_value",
    )
