"""The OpenAI Agents SDK's `HostedMCPTool`: the agent's MCP tool runs inside respond.

The SDK sends the tool as `{"type": "mcp", ...}` and expects the server to list and call
it, returning typed `mcp_list_tools` / `mcp_call` items: that is what respond does here,
against the tests' real MCP server (tests/support/mcp_server.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import openai
import pytest
from agents import (
    Agent,
    HostedMCPTool,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    set_tracing_disabled,
)
from agents.items import ToolCallItem

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


async def test_hosted_mcp_tool_runs_server_side(
    client: openai.AsyncOpenAI, mcp: McpTestServer
) -> None:
    tool = HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "tests",
            "server_url": mcp.url,
            "require_approval": "never",
            "allowed_tools": ["get_nonce"],
        }
    )
    agent = Agent(
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
    result = await Runner.run(agent, "What is the secret word?")
    mcp_calls = [
        item.raw_item
        for item in result.new_items
        if isinstance(item, ToolCallItem) and getattr(item.raw_item, "type", None) == "mcp_call"
    ]
    assert len(mcp_calls) == 1
    call = mcp_calls[0]
    assert call.name == "get_nonce"  # type: ignore[union-attr]
    assert call.output == mcp.nonce  # type: ignore[union-attr]
    assert isinstance(result.final_output, str)
    assert len(result.raw_responses) == 1  # one response: the SDK ran nothing itself
