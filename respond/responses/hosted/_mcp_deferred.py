"""Deferred MCP servers (`defer_loading: true` on an `mcp` tool): listed as usual, their
tools shown to the model only once a tool search loads them (responses/deferred.py does
the same for functions and namespaces).

A search that loads one of a server's tools lists it as the request's `mcp` tool narrowed
to that tool (`allowed_tools: [name]`), without its credentials. Every such entry in a
`tool_search_output` of the context (a search respond ran earlier in the conversation, or
the client's own) loads those tools for the rest of the conversation; an entry without
`allowed_tools` loads the whole server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from respond.protocol.requests import InputItem, ToolSearchOutputInput
from respond.protocol.tools import McpTool

__all__ = ["Loaded", "loaded_by", "searchable_wire"]

# Never listed back: the client's credentials for the server.
_SECRET = {"headers", "authorization"}


class Loaded:
    """The MCP tools the context's searches loaded, by server label."""

    def __init__(self) -> None:
        self._names: dict[str, set[str] | None] = {}  # None: the whole server

    def add(self, label: str, names: Sequence[str] | None) -> None:
        held = self._names.get(label, set())
        self._names[label] = None if names is None or held is None else held | set(names)

    def has(self, label: str, name: str) -> bool:
        if label not in self._names:
            return False
        names = self._names[label]
        return names is None or name in names


def loaded_by(context: Sequence[InputItem]) -> Loaded:
    loaded = Loaded()
    for item in context:
        if isinstance(item, ToolSearchOutputInput):
            for tool in item.tools:
                if isinstance(tool, McpTool) and isinstance(tool.server_label, str):
                    loaded.add(tool.server_label, _names(tool.allowed_tools))
    return loaded


def searchable_wire(tool: McpTool, name: str) -> dict[str, Any]:
    """How a search lists one tool of a deferred server: the request's tool, narrowed."""
    wire: dict[str, Any] = tool.model_dump(mode="json", exclude_none=True, exclude=_SECRET)
    wire.pop("defer_loading", None)
    return {**wire, "allowed_tools": [name]}


def _names(allowed: Any) -> list[str] | None:
    if isinstance(allowed, list):
        return [str(name) for name in allowed]
    if isinstance(allowed, dict) and isinstance(allowed.get("tool_names"), list):
        return [str(name) for name in allowed["tool_names"]]
    return None
