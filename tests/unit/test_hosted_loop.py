"""The hosted tool loop's rules, with a FAKE scripted engine and a FAKE executor.

Named as fakes: what a real model does on demand is not scriptable (exactly N tokens, a
call after a call), so these tests drive the loop's logic; tests/e2e/test_mcp.py runs the
same loop with the real model and real MCP servers.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from respond.engines import _base as d
from respond.engines._order import checked
from respond.protocol.resource import ResponseResource
from respond.responses.events import EventBuilder
from respond.responses.hosted import CallResult, Hosted, HostedTool
from respond.responses.hosted._base import Approved
from respond.responses.hosted._loop import TurnStream, run_turns
from respond.responses.kinds import Kinds, calls_for
from respond.testing import ScriptedEngine


class FakeExecutor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def call(self, name: str, arguments: str) -> CallResult:
        self.calls.append((name, arguments))
        return CallResult(output=f"result {len(self.calls)}")


def hosted(executor: FakeExecutor) -> Hosted:
    tool = HostedTool(
        visible="lookup",
        server_label="s",
        name="lookup",
        description=None,
        parameters={"type": "object"},
        needs_approval=False,
        executor=executor,
    )
    return Hosted(tools={"lookup": tool})


def call(name: str = "lookup", tokens: int = 5) -> list[d.Delta]:
    return [
        d.ToolCallStart(call_id=f"call_{name}", name=name),
        d.ToolCallArgumentsDelta('{"q": 1}'),
        d.ToolCallEnd(),
        d.Usage(input_tokens=10, output_tokens=tokens),
        d.Finish("stop"),
    ]


def text(tokens: int = 3) -> list[d.Delta]:
    return [d.TextDelta("done"), d.Usage(input_tokens=20, output_tokens=tokens), d.Finish("stop")]


async def run(
    scripts: Sequence[Sequence[d.Delta]],
    *,
    max_tokens: int | None = None,
    max_calls: int | None = None,
    approved: int = 0,
) -> tuple[EventBuilder, ScriptedEngine, FakeExecutor]:
    engine = ScriptedEngine(scripts)
    executor = FakeExecutor()
    turn = d.ChatTurn(
        model="m",
        messages=[d.ChatMessage(role="user", content="hi")],
        tool_choice=d.ToolChoice(mode="required"),
        max_output_tokens=max_tokens,
        max_tool_calls=max_calls,
    )
    resource = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    the_hosted = hosted(executor)
    tool = the_hosted.tools["lookup"]
    the_hosted.approved = [Approved(f"mcpr_{n}", tool, '{"q": 0}') for n in range(approved)]
    builder = EventBuilder(resource, kinds=Kinds(calls_for(hosted=the_hosted.tools)))
    builder.start()
    events: AsyncGenerator[object, None] = run_turns(_stream(engine), turn, the_hosted, builder)
    async for _ in events:
        pass
    builder.finish()
    return builder, engine, executor


async def test_calls_run_and_the_next_turn_sees_their_results() -> None:
    builder, engine, executor = await run([call(), call(), text()])
    assert executor.calls == [("lookup", '{"q": 1}'), ("lookup", '{"q": 1}')]
    assert [i.type for i in builder.response.output] == ["mcp_call", "mcp_call", "message"]
    last = engine.turns[-1]
    assert [m.role for m in last.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert last.messages[2].content == "result 1"
    assert last.messages[2].tool_call_id == "call_lookup"
    # Forcing applies to the first turn only.
    assert engine.turns[0].tool_choice.mode == "required"
    assert engine.turns[1].tool_choice.mode == "auto"
    usage = builder.response.usage
    assert usage is not None and usage.output_tokens == 13 and usage.input_tokens == 40


async def test_max_tool_calls_leaves_the_next_turn_without_tools() -> None:
    _, engine, executor = await run([call(), text()], max_calls=1)
    assert len(executor.calls) == 1
    assert engine.turns[1].tool_choice.mode == "none"


async def test_approved_calls_satisfy_a_forced_tool_choice() -> None:
    # Forced again after the approved call ran, the model would call again, and an
    # approval-gated tool would ask for approval in every response, for ever.
    builder, engine, executor = await run([text()], approved=1)
    assert executor.calls == [("lookup", '{"q": 0}')]
    assert engine.turns[0].tool_choice.mode == "auto"
    assert [i.type for i in builder.response.output] == ["mcp_call", "message"]


async def test_approved_calls_count_against_max_tool_calls() -> None:
    _, engine, executor = await run([text()], max_calls=1, approved=1)
    assert len(executor.calls) == 1
    assert engine.turns[0].tool_choice.mode == "none"
    _, engine, _ = await run([text()], max_calls=3, approved=1)
    assert engine.turns[0].max_tool_calls == 2


async def test_max_output_tokens_counts_over_the_turns() -> None:
    builder, engine, _ = await run([call(tokens=6), call(tokens=6)], max_tokens=12)
    assert [t.max_output_tokens for t in engine.turns] == [12, 6]
    assert builder.response.status == "incomplete"
    details = builder.response.incomplete_details
    assert details is not None and details.reason == "max_output_tokens"


async def test_a_client_function_call_ends_the_response() -> None:
    mixed = call()[:3] + call("client_fn")
    builder, engine, executor = await run([mixed, text()])
    assert len(engine.turns) == 1  # no second turn: the client must run its function
    assert len(executor.calls) == 1  # the hosted call of the same turn did run
    assert [i.type for i in builder.response.output] == ["mcp_call", "function_call"]
    assert builder.response.status == "completed"


class FlagSettingEngine(ScriptedEngine):
    """Like the real engines: sets its turn's cancel flag when its stream ends."""

    async def stream(self, turn: d.ChatTurn) -> AsyncGenerator[d.Delta, None]:
        assert not turn.cancel.is_set(), "a turn started already cancelled"
        try:
            async for delta in super().stream(turn):
                yield delta
        finally:
            turn.cancel.set()


async def test_each_turn_starts_uncancelled() -> None:
    engine = FlagSettingEngine([call(), text()])
    executor = FakeExecutor()
    turn = d.ChatTurn(model="m", messages=[d.ChatMessage(role="user", content="hi")])
    resource = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    the_hosted = hosted(executor)
    builder = EventBuilder(resource, kinds=Kinds(calls_for(hosted=the_hosted.tools)))
    builder.start()
    async for _ in run_turns(_stream(engine), turn, the_hosted, builder):
        pass
    assert len(engine.turns) == 2
    assert builder.response.output[-1].type == "message"


def _stream(engine: d.Engine) -> TurnStream:
    """The engine's turns, checked against the delta rules as the run checks them."""
    return lambda turn: checked(engine.stream(turn), turn.cancel)
