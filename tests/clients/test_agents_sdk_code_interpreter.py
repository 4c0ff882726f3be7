"""The OpenAI Agents SDK's `CodeInterpreterTool` against the real server and bundled model.

Set up as the SDK's docs say for a custom endpoint (an `AsyncOpenAI(base_url=...)` client
in `OpenAIResponsesModel`, tracing disabled), with the call forced
(`tool_choice="code_interpreter"`) at temperature 0 under instructions the tiny model
follows: it passes the user's line of Python to the tool, which respond runs in its
sandbox, and the run ends with the model's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    CodeInterpreterTool,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    set_tracing_disabled,
)
from agents.items import ToolCallItem
from agents.stream_events import RawResponsesStreamEvent
from openai.types.responses import ResponseCodeInterpreterToolCall

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server, start_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def coder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("agents-code")), "--threads", "2", "--code-interpreter"
    )
    yield srv
    srv.stop()


@pytest.fixture
async def client(coder: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=coder.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name="coder",
        instructions="Run the user's Python code with the python tool.",
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=ModelSettings(
            temperature=0,
            max_tokens=80,
            tool_choice="code_interpreter",
            response_include=["code_interpreter_call.outputs"],
        ),
        tools=[
            CodeInterpreterTool(
                tool_config={"type": "code_interpreter", "container": {"type": "auto"}}
            )
        ],
    )


def code_calls(items: list[Any]) -> list[ResponseCodeInterpreterToolCall]:
    return [
        item.raw_item
        for item in items
        if isinstance(item, ToolCallItem)
        and isinstance(item.raw_item, ResponseCodeInterpreterToolCall)
    ]


async def test_a_forced_code_interpreter_call_runs_and_the_agent_answers(
    client: openai.AsyncOpenAI,
) -> None:
    result = await Runner.run(agent(client), "print(6*7)")
    (call,) = code_calls(result.new_items)
    assert call.status == "completed" and call.container_id.startswith("cntr_")
    assert [o.model_dump() for o in call.outputs or []] == [{"type": "logs", "logs": "42\n"}]
    assert isinstance(result.final_output, str) and result.final_output


async def test_a_streamed_run_carries_the_code_interpreter_events(
    client: openai.AsyncOpenAI,
) -> None:
    result = Runner.run_streamed(agent(client), "print(6*7)")
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if isinstance(event, RawResponsesStreamEvent)
    ]
    assert "response.code_interpreter_call.interpreting" in kinds
    assert "response.code_interpreter_call.completed" in kinds
    assert kinds[-1] == "response.completed"
    (call,) = code_calls(result.new_items)
    assert call.status == "completed"
