"""The hosted-family seam: a family defined only here runs inside a response, through
`Responses` and the loop, without a line of it in respond. The FAKE ScriptedEngine makes
the call on demand (a real model's calls are not scriptable); its items are the MCP
kind's (`family="mcp"`), as a new item kind is a module of kinds/."""

from __future__ import annotations

import json
from pathlib import Path

from respond.engines import _base as d
from respond.protocol.requests import CreateResponseBody
from respond.responses.hosted import CallResult, Hosted, HostedTool, Request, Toolsets
from respond.responses.kinds import KINDS
from respond.responses.run import Responses
from respond.testing import ScriptedEngine


class Shout:
    """A FAKE family: one tool that upper-cases its text, offered to every request."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def echoed(self, tools: list[dict[str, object]]) -> list[dict[str, object]]:
        return tools

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        self.requests.append(request)
        tool = HostedTool(
            visible="shout",
            server_label="toy",
            name="shout",
            description="Upper-case a text.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
            needs_approval=False,
            executor=self,
        )
        return Hosted(tools={"shout": tool})

    async def call(self, name: str, arguments: str) -> CallResult:
        return CallResult(output=json.loads(arguments)["text"].upper())


def scripts() -> list[list[d.Delta]]:
    call: list[d.Delta] = [
        d.ToolCallStart(call_id="call_1", name="shout"),
        d.ToolCallArgumentsDelta('{"text": "hi"}'),
        d.ToolCallEnd(),
    ]
    answer: list[d.Delta] = [d.TextDelta("It says HI.")]
    end: list[d.Delta] = [d.Usage(input_tokens=5, output_tokens=3), d.Finish("stop")]
    return [call + end, answer + end]


async def test_a_family_defined_here_runs_inside_a_response() -> None:
    engine = ScriptedEngine(scripts())
    family = Shout()
    service = Responses({engine.info.id: engine}, hosted=Toolsets([family]))
    body = CreateResponseBody.model_validate({"model": engine.info.id, "input": "Shout hi."})
    run = await service.prepare(body, tenant="t1")
    async for _ in service.events(run):
        pass
    response = run.builder.response
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["mcp_call", "message"]
    assert response.output[0].output == "HI"  # type: ignore[union-attr]
    assert [spec.name for spec in engine.turns[0].tools] == ["shout"]
    told = engine.turns[1].messages[-1]
    assert (told.role, told.content, told.tool_call_id) == ("tool", "HI", "call_1")
    assert family.requests[0].tenant == "t1"


# Where the response runs and the app is wired: none of them may name a family, so adding
# one is its own modules and an entry in hosted.families (composed in respond/_parts.py).
FAMILY_FREE = [
    "respond/responses/run.py",
    "respond/responses/hosted/_loop.py",
    "respond/app.py",
    "respond/_lifespan.py",
]


def test_the_run_the_loop_and_the_app_name_no_family() -> None:
    names = {family for kind in KINDS for family in kind.runs}
    assert {"mcp", "file_search", "code_interpreter", "shell", "web_search"} <= names
    root = Path(__file__).parents[2]
    for path in FAMILY_FREE:
        text = (root / path).read_text().lower()
        assert [name for name in sorted(names) if name in text] == [], path
