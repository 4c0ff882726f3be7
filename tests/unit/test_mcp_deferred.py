"""Deferred MCP servers: which of their tools the context's searches loaded, and how a
search lists one (responses/hosted/_mcp_deferred.py)."""

from __future__ import annotations

from typing import Any

from respond.protocol.requests import CreateResponseBody
from respond.protocol.tools import McpTool
from respond.responses.hosted._mcp_deferred import loaded_by, searchable_wire

SERVER = {
    "type": "mcp",
    "server_label": "docs",
    "server_url": "https://mcp.example/mcp",
    "authorization": "secret-token",
    "headers": {"X-Key": "k"},
    "defer_loading": True,
}


def context(*outputs: list[dict[str, Any]]) -> Any:
    items = [{"type": "tool_search_output", "execution": "client", "call_id": f"c{i}",
              "tools": tools} for i, tools in enumerate(outputs)]  # fmt: skip
    return CreateResponseBody.model_validate({"input": items}).input


def test_a_search_lists_a_tool_as_the_server_narrowed_to_it_without_credentials() -> None:
    wire = searchable_wire(McpTool.model_validate(SERVER), "search")
    assert wire == {
        "type": "mcp",
        "server_label": "docs",
        "server_url": "https://mcp.example/mcp",
        "allowed_tools": ["search"],
    }


def test_the_contexts_searches_load_named_tools_or_whole_servers() -> None:
    named = {**SERVER, "allowed_tools": ["search"]}
    whole = {"type": "mcp", "server_label": "mail", "server_url": "https://m.example/mcp"}
    filtered = {**SERVER, "server_label": "wiki", "allowed_tools": {"tool_names": ["read"]}}
    loaded = loaded_by(context([named], [whole, filtered]))
    assert loaded.has("docs", "search") and not loaded.has("docs", "fetch")
    assert loaded.has("mail", "anything")
    assert loaded.has("wiki", "read") and not loaded.has("wiki", "write")
    assert not loaded.has("other", "search")
