"""Hosted tools without a network: naming, approval rules, config, events, replay.

Egress has its own table in test_egress.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from respond._config_file import ConfigError, load_config, load_mcp_config
from respond.engines import _base as d
from respond.protocol.items import McpCallItem, McpListToolsItem, McpToolInfo
from respond.protocol.requests import (
    InputItem,
    InputMessage,
    McpApprovalRequestInput,
    McpApprovalResponseInput,
    McpCallInput,
    McpListToolsInput,
)
from respond.protocol.resource import ResponseResource
from respond.protocol.tools import McpTool
from respond.responses.context import items_to_messages
from respond.responses.events import EventBuilder
from respond.responses.fold import fold_events
from respond.responses.hosted import CallResult, HostedTool
from respond.responses.hosted._base import visible_names
from respond.responses.hosted.mcp import McpServer
from respond.responses.kinds import Kinds, calls_for
from respond.responses.kinds.mcp_call import McpListing, echo_mcp_tool

# ---------------------------------------------------------------- names and rules


def test_names_are_unambiguous_across_servers_and_functions() -> None:
    names = visible_names(
        [("a", "search"), ("b", "search"), ("a", "fetch.page"), ("b", "lookup")],
        taken=["lookup"],
    )
    assert names == {
        ("a", "search"): "a__search",
        ("b", "search"): "b__search",
        ("a", "fetch.page"): "fetch_page",
        ("b", "lookup"): "b__lookup",
    }


def server(approval: Any = None, allowed: Any = None) -> McpServer:
    request = McpTool(type="mcp", server_label="s", server_url="http://127.0.0.1/mcp")
    return McpServer("s", "http://127.0.0.1/mcp", {}, approval, allowed, "tools[0]", request)


def tool(name: str, read_only: bool = False) -> McpToolInfo:
    annotations = {"readOnlyHint": True} if read_only else None
    return McpToolInfo(name=name, input_schema={"type": "object"}, annotations=annotations)


def test_approval_rules_follow_openai() -> None:
    assert server().needs_approval(tool("x"))  # the default is "always"
    assert not server("never").needs_approval(tool("x"))
    rule = {"never": {"tool_names": ["safe"]}}
    assert not server(rule).needs_approval(tool("safe"))
    assert server(rule).needs_approval(tool("other"))
    assert server({"always": {"tool_names": ["x"]}}).needs_approval(tool("x"))


def test_allowed_tools_by_name_or_read_only() -> None:
    assert server(allowed=["a"]).admits(tool("a"))
    assert not server(allowed=["a"]).admits(tool("b"))
    read_only = server(allowed={"read_only": True})
    assert read_only.admits(tool("r", read_only=True))
    assert not read_only.admits(tool("w"))


def test_the_echoed_tool_has_no_secrets() -> None:
    echoed = echo_mcp_tool(
        McpTool(
            type="mcp",
            server_label="s",
            server_url="http://127.0.0.1/mcp",
            headers={"X-Key": "secret"},
            authorization="secret",
        )
    )
    assert "secret" not in repr(echoed)
    assert echoed["server_label"] == "s" and echoed["require_approval"] == "always"


# ---------------------------------------------------------------- config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "respond.toml"
    path.write_text(text)
    return path


def test_mcp_table_with_servers_and_allow_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[mcp]
allow = ["*.corp.example"]
timeout = 5

[mcp.servers.docs]
url = "https://docs.corp.example/mcp"
headers = { Authorization = "Bearer abc" }
require_approval = "never"
""",
    )
    assert load_config(path) == []  # models come from the flags
    settings = load_mcp_config(path, allow=("localhost",), timeout=60)
    assert settings.allow == ("*.corp.example", "localhost")
    assert settings.timeout == 5
    docs = settings.servers["docs"]
    assert docs.url == "https://docs.corp.example/mcp"
    assert docs.headers == {"Authorization": "Bearer abc"}
    assert docs.require_approval == "never"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[mcp.servers.x]\nurl = "ftp://h"\n', "mcp.servers.x.url"),
        ('[mcp.servers.x]\nurl = "http://h"\ncolour = 1\n', "mcp.servers.x.colour"),
        ("[mcp]\nallow = 3\n", "mcp.allow"),
        ("[mcp]\ntimeout = -1\n", "mcp.timeout"),
    ],
)
def test_mcp_mistakes_name_their_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_mcp_config(write(tmp_path, text))


# ---------------------------------------------------------------- events


class NoCalls:
    async def call(self, name: str, arguments: str) -> CallResult:
        raise AssertionError("the builder never runs calls")


def hosted_tool(needs_approval: bool) -> HostedTool:
    return HostedTool(
        visible="get_nonce",
        server_label="s",
        name="get_nonce",
        description=None,
        parameters={"type": "object"},
        needs_approval=needs_approval,
        executor=NoCalls(),
    )


def builder(needs_approval: bool = False) -> EventBuilder:
    resource = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    calls = calls_for(hosted={"get_nonce": hosted_tool(needs_approval)})
    return EventBuilder(resource, kinds=Kinds(calls))


CALL = (
    d.ToolCallStart(call_id="call_1", name="get_nonce"),
    d.ToolCallArgumentsDelta("{}"),
    d.ToolCallEnd(),
)


def test_listing_then_call_then_text_in_one_response() -> None:
    b = builder()
    listing = McpListToolsItem(id="x", server_label="s", tools=[tool("get_nonce")])
    events = b.start() + b.add(McpListing(listing)) + b.close()
    for delta in CALL:
        events += b.push(delta)
    (item_id,) = b.calling
    events += b.call_done(item_id, CallResult(output="n-1"))
    events += b.push(d.TextDelta("It is n-1."))
    events += b.finish()
    assert [e.type for e in events][2:] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = b.response
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    call = final.output[1]
    assert isinstance(call, McpCallItem)
    assert (call.status, call.output, call.arguments) == ("completed", "n-1", "{}")
    assert fold_events(events) == final


def test_a_call_that_needs_approval_is_a_request_item() -> None:
    b = builder(needs_approval=True)
    events = b.start()
    for delta in CALL:
        events += b.push(delta)
    events += b.finish()
    assert not b.calling
    (request,) = b.response.output
    assert request.type == "mcp_approval_request"
    assert request.model_dump()["arguments"] == "{}"
    assert "response.mcp_call.in_progress" not in [e.type for e in events]


def test_a_call_still_running_when_cancelled_ends_incomplete() -> None:
    b = builder()
    events = b.start()
    for delta in CALL:
        events += b.push(delta)
    events += b.cancel()
    (call,) = b.response.output
    assert isinstance(call, McpCallItem)
    assert call.status == "incomplete" and call.output is None
    assert b.response.status == "cancelled"
    assert fold_events(events).output == b.response.output


# ---------------------------------------------------------------- replay


def test_stored_mcp_items_replay_as_calls_and_results() -> None:
    items: list[InputItem] = [
        InputMessage(role="user", content="go"),
        McpListToolsInput(type="mcp_list_tools", server_label="s", tools=[]),
        McpCallInput(type="mcp_call", id="mcp_1", server_label="s", name="get_nonce", output="n-1"),
        McpApprovalRequestInput(
            type="mcp_approval_request", id="mcpr_1", server_label="s", name="add", arguments="{}"
        ),
        McpApprovalResponseInput(
            type="mcp_approval_response", approval_request_id="mcpr_1", approve=False, reason="no"
        ),
    ]
    messages = items_to_messages(items, vision=False, hosted_names=lambda s, n: f"{s}__{n}")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[1].tool_calls[0].name == "s__get_nonce"
    assert messages[2].content == "n-1" and messages[2].tool_call_id == "mcp_1"
    assert messages[4].tool_call_id == "mcpr_1"
    assert "refused" in messages[4].content and "no" in messages[4].content


def test_listed_annotations_keep_their_mcp_names() -> None:
    from mcp_types import Tool, ToolAnnotations

    from respond.responses.hosted._mcp_client import _tool_info

    listed = Tool(
        name="t", input_schema={"type": "object"}, annotations=ToolAnnotations(read_only_hint=True)
    )
    assert _tool_info(listed).annotations == {"readOnlyHint": True}
    assert server(allowed={"read_only": True}).admits(_tool_info(listed))


def test_a_stored_listing_reads_back_with_its_tools() -> None:
    """A listing's tools are MCP tool infos, not request tools (they have no `type`)."""
    stored = {
        "type": "mcp_list_tools",
        "server_label": "s",
        "tools": [{"name": "get_nonce", "input_schema": {"type": "object"}}],
    }
    listing = McpListToolsInput.model_validate(stored)
    assert listing.tools[0]["name"] == "get_nonce"
