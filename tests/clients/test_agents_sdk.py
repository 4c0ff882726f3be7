"""The OpenAI Agents SDK (`openai-agents`) against the real server, set up as its docs say.

Documented setup for a custom endpoint: an `AsyncOpenAI(base_url=...)` client wrapped in
`OpenAIResponsesModel`, tracing disabled (nothing may leave the machine). WebSocket runs
use the SDK's own `responses_websocket_session`. The bundled model is tiny: the tests
assert that runs complete and items come back typed, not what the model says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ApplyPatchOperation,
    ApplyPatchResult,
    ApplyPatchTool,
    ModelSettings,
    OpenAIResponsesModel,
    RunErrorHandlerInput,
    RunErrorHandlerResult,
    Runner,
    ShellCommandRequest,
    ShellTool,
    function_tool,
    responses_websocket_session,
    set_tracing_disabled,
)
from agents.items import ReasoningItem, ToolCallItem, ToolCallOutputItem
from agents.stream_events import RawResponsesStreamEvent
from openai.types.responses import ResponseReasoningTextDeltaEvent

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.fake_server import start_fake_server
from tests.support.server import Server

PROMPT = "Reply with one word: yes or no?"
SETTINGS = ModelSettings(temperature=0, max_tokens=16)
# Forced calls leave parallel calls allowed (the SDK's default): the bundled model then
# repeats its call, and respond ends the turn at the first exact repeat, so the response is
# completed (the SDK rejects an incomplete one).

set_tracing_disabled(True)

calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"Sunny in {city}."


@pytest.fixture
async def client(server: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI, **settings: Any) -> Agent[Any]:
    return Agent(
        name="assistant",
        instructions="You answer briefly.",
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=SETTINGS.resolve(ModelSettings(**settings)),
        tools=[get_weather],
    )


async def test_run_completes(client: openai.AsyncOpenAI) -> None:
    result = await Runner.run(agent(client), PROMPT)
    assert isinstance(result.final_output, str) and result.final_output
    assert result.last_response_id and result.last_response_id.startswith("resp_")


async def test_streamed_run_completes(client: openai.AsyncOpenAI) -> None:
    result = Runner.run_streamed(agent(client), PROMPT)
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if isinstance(event, RawResponsesStreamEvent)
    ]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert isinstance(result.final_output, str) and result.final_output


async def test_function_tool_loop(client: openai.AsyncOpenAI, server: Server) -> None:
    calls.clear()
    # Forced on the first turn; the SDK then resets tool_choice, so the model answers in text
    # after seeing the tool's output (function_call + function_call_output replayed as input).
    result = await Runner.run(
        agent(client, tool_choice="get_weather", max_tokens=48),
        "What is the weather in Paris?",
    )
    assert calls, "the tool was called"
    kinds = [type(item) for item in result.new_items]
    assert ToolCallItem in kinds and ToolCallOutputItem in kinds
    assert isinstance(result.final_output, str)


async def test_stop_on_first_tool(client: openai.AsyncOpenAI, server: Server) -> None:
    forced = agent(client, tool_choice="required", max_tokens=48)
    forced.tool_use_behavior = "stop_on_first_tool"
    result = await Runner.run(forced, "What is the weather in Oslo?")
    assert isinstance(result.final_output, str) and result.final_output.startswith("Sunny in")


async def test_streamed_tool_run(client: openai.AsyncOpenAI) -> None:
    calls.clear()
    forced = agent(client, tool_choice="required", max_tokens=48)
    forced.tool_use_behavior = "stop_on_first_tool"
    result = Runner.run_streamed(forced, "What is the weather in Rome?")
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if isinstance(event, RawResponsesStreamEvent)
    ]
    assert kinds[-1] == "response.completed", kinds
    assert "response.function_call_arguments.delta" in kinds
    assert len(calls) == 1  # one call, not its repeats
    assert isinstance(result.final_output, str) and result.final_output.startswith("Sunny in")


async def test_reasoning_text_arrives_from_a_thinking_model(tmp_path: Path) -> None:
    """A model that thinks (the FAKE scripted engine writes a <think> block): the SDK gets
    the reasoning as it streams (OpenAI's response.reasoning_text.delta) and as an item."""
    thought = "The user asks yes or no. Say yes."
    script = [[{"raw": f"<think>{thought}</think>\n\nYes."}]]
    server, _ = start_fake_server(tmp_path, script)
    try:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as sdk:
            thinker = Agent(
                name="assistant",
                model=OpenAIResponsesModel(model="fake-model", openai_client=sdk),
            )
            result = Runner.run_streamed(thinker, PROMPT)
            streamed = [
                event.data.delta
                async for event in result.stream_events()
                if isinstance(event, RawResponsesStreamEvent)
                and isinstance(event.data, ResponseReasoningTextDeltaEvent)
            ]
    finally:
        server.stop()
    assert "".join(streamed) == thought
    (item,) = [item for item in result.new_items if isinstance(item, ReasoningItem)]
    assert item.raw_item.content is not None
    assert [part.text for part in item.raw_item.content] == [thought]
    assert result.final_output == "Yes."


async def test_two_turns_with_previous_response_id(
    client: openai.AsyncOpenAI, server: Server
) -> None:
    assistant = agent(client)
    first = await Runner.run(assistant, PROMPT)
    second = await Runner.run(
        assistant,
        "Reply with one word: true or false?",
        previous_response_id=first.last_response_id,
    )
    assert second.last_response_id != first.last_response_id
    assert isinstance(second.final_output, str) and second.final_output
    # The second turn saw the first: its prompt is longer than the first turn's.
    first_usage, second_usage = first.context_wrapper.usage, second.context_wrapper.usage
    assert second_usage.input_tokens > first_usage.input_tokens


async def test_websocket_transport_two_turns(server: Server) -> None:
    """The SDK's WebSocket transport; store=False chains through the connection's memory."""
    async with responses_websocket_session(base_url=server.base_url, api_key="unused") as ws:
        assistant = Agent(
            name="assistant",
            instructions="You answer briefly.",
            model=BUNDLED_ALIAS,
            model_settings=SETTINGS.resolve(ModelSettings(store=False)),
        )
        first = await ws.run(assistant, PROMPT)
        streamed = ws.run_streamed(
            assistant, "And again?", previous_response_id=first.last_response_id
        )
        kinds = [
            event.data.type
            async for event in streamed.stream_events()
            if isinstance(event, RawResponsesStreamEvent)
        ]
    assert isinstance(first.final_output, str) and first.final_output
    assert kinds[-1] == "response.completed"
    assert streamed.last_response_id != first.last_response_id
    # Both turns really went over the socket (the server logs each WebSocket turn).
    assert f"WS /v1/responses {first.last_response_id}" in server.log()
    assert f"WS /v1/responses {streamed.last_response_id}" in server.log()


async def test_shell_tool_runs_a_forced_call(client: openai.AsyncOpenAI) -> None:
    ran: list[list[str]] = []

    def execute(request: ShellCommandRequest) -> str:
        ran.append(list(request.data.action.commands))
        return "README.md\n"

    def stop(error: RunErrorHandlerInput[Any]) -> RunErrorHandlerResult:
        # After the forced turn tool_choice is "auto", and the tiny model may go on calling
        # the shell: the run stops at max_turns with the calls and outputs it has.
        return RunErrorHandlerResult(final_output="stopped")

    shell = agent(client, tool_choice="required", max_tokens=256)
    shell.tools = [ShellTool(executor=execute, environment={"type": "local"})]
    result = await Runner.run(
        shell, "List the files in this folder.", max_turns=2, error_handlers={"max_turns": stop}
    )
    assert ran and all(ran), "the SDK ran the shell call's commands"
    # The second turn sent the shell_call and its shell_call_output back: respond took them.
    assert len(result.raw_responses) == 2
    assert any(isinstance(item, ToolCallOutputItem) for item in result.new_items)


class Editor:
    def __init__(self) -> None:
        self.operations: list[ApplyPatchOperation] = []

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(operation)
        return ApplyPatchResult(output="created")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(operation)
        return ApplyPatchResult(output="updated")

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(operation)
        return ApplyPatchResult(output="deleted")


async def test_apply_patch_tool_runs_a_forced_call(client: openai.AsyncOpenAI) -> None:
    editor = Editor()
    patching = agent(client, tool_choice="required", max_tokens=96)
    patching.tools = [ApplyPatchTool(editor=editor)]
    result = await Runner.run(patching, "Create hello.txt saying hello.", max_turns=3)
    assert editor.operations and editor.operations[0].path, "the SDK applied the patch"
    assert any(isinstance(item, ToolCallOutputItem) for item in result.new_items)
