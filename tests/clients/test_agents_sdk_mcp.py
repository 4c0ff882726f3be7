"""The OpenAI Agents SDK's `HostedMCPTool`: the agent's MCP tool runs inside respond.

The SDK sends the tool as `{"type": "mcp", ...}` and expects the server to list and call
it, returning typed `mcp_list_tools` / `mcp_call` items: that is what respond does here,
against the tests' real MCP server (tests/support/mcp_server.py), with the bundled model's
call forced (`tool_choice="required"`), streamed and not, and with the SDK's approval hook
(`on_approval_request`) answering an `mcp_approval_request`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    HostedMCPTool,
    MCPToolApprovalFunctionResult,
    MCPToolApprovalRequest,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    RunResult,
    RunResultStreaming,
    set_tracing_disabled,
)
from agents.items import MCPApprovalRequestItem, MCPApprovalResponseItem, ToolCallItem
from agents.stream_events import RawResponsesStreamEvent

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.mcp import McpTestServer, start_mcp_server
from tests.support.server import Server

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpTestServer]:
    server = start_mcp_server(Path(tmp_path_factory.mktemp("mcp-agents")))
    yield server
    server.stop()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI, tool: HostedMCPTool) -> Agent[Any]:
    return Agent(
        name="assistant",
        instructions="Use the tool, then answer briefly.",
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=ModelSettings(
            temperature=0,
            # Over the whole response: the forced call, then the answer after it.
            max_tokens=256,
            tool_choice="required",
            parallel_tool_calls=False,
            extra_args={"max_tool_calls": 1},
        ),
        tools=[tool],
    )


def hosted(mcp: McpTestServer, approval: str = "never", **hooks: Any) -> HostedMCPTool:
    return HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "tests",
            "server_url": mcp.url,
            "require_approval": approval,  # type: ignore[typeddict-item]
            "allowed_tools": ["get_nonce"],
        },
        **hooks,
    )


def the_call(result: RunResult | RunResultStreaming, mcp: McpTestServer) -> None:
    """The run made one MCP call, respond ran it, and the agent answered after it."""
    mcp_calls = [
        item.raw_item
        for item in result.new_items
        if isinstance(item, ToolCallItem) and getattr(item.raw_item, "type", None) == "mcp_call"
    ]
    assert len(mcp_calls) == 1
    call = mcp_calls[0]
    assert call.name == "get_nonce"  # type: ignore[union-attr]
    assert call.output == mcp.nonce  # type: ignore[union-attr]
    assert isinstance(result.final_output, str) and result.final_output.strip()


async def test_hosted_mcp_tool_runs_server_side(
    client: openai.AsyncOpenAI, mcp: McpTestServer
) -> None:
    result = await Runner.run(agent(client, hosted(mcp)), "What is the secret word?")
    the_call(result, mcp)
    assert len(result.raw_responses) == 1  # one response: the SDK ran nothing itself


async def test_a_streamed_run_gets_the_mcp_events(
    client: openai.AsyncOpenAI, mcp: McpTestServer
) -> None:
    result = Runner.run_streamed(agent(client, hosted(mcp)), "What is the secret word?")
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if isinstance(event, RawResponsesStreamEvent)
    ]
    assert kinds[-1] == "response.completed"
    listed = kinds.index("response.mcp_list_tools.completed")
    called = kinds.index("response.mcp_call.completed")
    assert listed < called < kinds.index("response.output_text.delta")
    the_call(result, mcp)


async def test_the_sdks_approval_hook_answers_an_approval_request(
    client: openai.AsyncOpenAI, mcp: McpTestServer
) -> None:
    asked: list[str] = []

    def approve(request: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
        asked.append(request.data.name)
        return {"approve": True}

    tool = hosted(mcp, "always", on_approval_request=approve)
    result = await Runner.run(agent(client, tool), "What is the secret word?", max_turns=3)
    assert asked == ["get_nonce"]
    # The first response asked; the SDK approved; respond ran the call in the second.
    kinds = [type(item) for item in result.new_items]
    assert kinds.index(MCPApprovalRequestItem) < kinds.index(MCPApprovalResponseItem)
    assert len(result.raw_responses) == 2
    the_call(result, mcp)
