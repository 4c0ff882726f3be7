"""The hosted shell on a server that runs no code (no --code-interpreter): left out, and
forcing it refused; a client's shell beside it is unchanged. The FAKE ScriptedEngine stands
for the model (tests/e2e/test_hosted_shell.py runs the real sandbox)."""

from __future__ import annotations

from typing import Any

import pytest

from respond.engines import _base as d
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.responses.hosted import families
from respond.responses.run import Responses
from respond.testing import ScriptedEngine

AUTO = {"type": "shell", "environment": {"type": "container_auto"}}
ANSWER: list[d.Delta] = [
    d.TextDelta("Hi."),
    d.Usage(input_tokens=1, output_tokens=1),
    d.Finish("stop"),
]


async def prepare(body: dict[str, Any]) -> tuple[Responses, ScriptedEngine, Any]:
    engine = ScriptedEngine([ANSWER])
    service = Responses({engine.info.id: engine}, hosted=families())
    request = CreateResponseBody.model_validate({"model": engine.info.id, **body})
    return service, engine, await service.prepare(request, tenant=None)


async def test_without_containers_a_hosted_shell_is_left_out() -> None:
    service, engine, run = await prepare({"input": "hi", "tools": [AUTO]})
    async for _ in service.events(run):
        pass
    assert engine.turns[0].tools == [] and run.builder.response.tools == []
    with pytest.raises(APIError) as refused:
        await prepare({"input": "hi", "tools": [AUTO], "tool_choice": {"type": "shell"}})
    assert refused.value.param == "tool_choice" and "--code-interpreter" in refused.value.message


@pytest.mark.parametrize("environment", [None, {"type": "local"}])
async def test_a_shell_without_a_container_is_the_clients(environment: Any) -> None:
    tool = {"type": "shell", **({"environment": environment} if environment else {})}
    _, _, run = await prepare({"input": "hi", "tools": [tool]})
    assert [spec.name for spec in run.turn.tools] == ["shell"]
    assert run.hosted.tools == {}
