"""A forced code_interpreter call through the real server, its code scripted into the
engine (ScriptedEngine: the model's part is a fake, everything after it is real)."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.responses.tool_param import CodeInterpreterContainer

from respond.engines import (
    Finish,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.testing import ScriptedEngine

__all__ = ["call_logs", "run_code"]


def run_code(
    client: openai.OpenAI, engine: ScriptedEngine, code: str, container: CodeInterpreterContainer
) -> Any:
    """One response whose forced call runs `code` in `container`; its call item."""
    engine.enqueue(
        ToolCallStart(call_id="call_1", name="python"),
        ToolCallArgumentsDelta(json.dumps({"code": code})),
        ToolCallEnd(),
        Usage(1, 1),
        Finish("stop"),
    )
    engine.enqueue(TextDelta("Done."), Usage(1, 1), Finish("stop"))
    response = client.responses.create(
        model=engine.info.id,
        input="Run it.",
        tools=[{"type": "code_interpreter", "container": container}],
        tool_choice={"type": "code_interpreter"},
        include=["code_interpreter_call.outputs"],
    )
    assert response.status == "completed", response.error
    call = response.output[0]
    assert call.type == "code_interpreter_call"
    return call


def call_logs(call: Any) -> str:
    """The call's `logs` outputs, joined."""
    return "\n".join(o.logs for o in call.outputs or [] if o.type == "logs")
