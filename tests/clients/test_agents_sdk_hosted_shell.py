"""The OpenAI Agents SDK's `ShellTool` in hosted mode against the real server and model.

`ShellTool(environment={"type": "container_auto"})` takes no executor: the server runs the
commands. respond is started with `--code-interpreter`, the call forced
(`tool_choice="shell"`) at temperature 0: respond runs the tiny model's commands in its
sandbox, the SDK gets the shell_call and its shell_call_output in one response, and the
run ends with the model's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    ShellTool,
    set_tracing_disabled,
)
from openai.types.responses import (
    ResponseFunctionShellToolCall,
    ResponseFunctionShellToolCallOutput,
)

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server, start_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("agents-shell")), "--threads", "2", "--code-interpreter"
    )
    yield srv
    srv.stop()


@pytest.fixture
async def client(sandboxed: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=sandboxed.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name="sheller",
        instructions="Run the user's shell command with the shell tool, then answer in one word.",
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=ModelSettings(temperature=0, max_tokens=300, tool_choice="shell"),
        tools=[ShellTool(environment={"type": "container_auto"})],
    )


async def test_a_hosted_shell_call_runs_on_the_server(client: openai.AsyncOpenAI) -> None:
    result = await Runner.run(agent(client), "echo hello")
    (response,) = result.raw_responses
    kinds = [item.type for item in response.output]
    assert kinds[:2] == ["shell_call", "shell_call_output"], kinds
    call, output = response.output[:2]
    assert isinstance(call, ResponseFunctionShellToolCall)
    assert isinstance(output, ResponseFunctionShellToolCallOutput)
    assert call.environment is not None and call.environment.type == "container_reference"
    assert len(output.output) == len(call.action.commands)
    assert isinstance(result.final_output, str)
