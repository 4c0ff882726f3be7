"""The ordering rules of Engine.stream: each one checked alone, then through a real run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Sequence

import httpx
import pytest

from respond import assemble, create_app
from respond.engines import (
    Delta,
    DeltaOrder,
    EngineError,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.engines._order import checked
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.schema import validate_event
from tests.support.sse import read_events

START = ToolCallStart("call_1", "f")
ARGS = ToolCallArgumentsDelta("{}")
END = ToolCallEnd()
USAGE = Usage(input_tokens=1, output_tokens=1)
FINISH = Finish("stop")


def check(deltas: Sequence[Delta], *, cancelled: bool = False) -> None:
    order = DeltaOrder()
    for delta in deltas:
        order.check(delta)
    order.end(cancelled=cancelled)


@pytest.mark.parametrize(
    "deltas",
    [
        [FINISH],
        [USAGE, FINISH],
        [ReasoningDelta("hm"), TextDelta("a"), ReasoningDelta("b"), TextDelta("c"), FINISH],
        [TextDelta("a"), START, ARGS, ARGS, END, START, END, TextDelta("b"), USAGE, FINISH],
    ],
    ids=["finish-only", "usage-finish", "text-and-reasoning", "calls-between-text"],
)
def test_well_ordered_streams_pass(deltas: list[Delta]) -> None:
    check(deltas)


@pytest.mark.parametrize(
    ("deltas", "rule"),
    [
        ([ARGS, FINISH], "ToolCallArgumentsDelta outside a tool call"),
        ([START, END, ARGS, FINISH], "ToolCallArgumentsDelta outside a tool call"),
        ([END, FINISH], "ToolCallEnd without a ToolCallStart"),
        ([START, END, END, FINISH], "ToolCallEnd without a ToolCallStart"),
        ([START, START, END, FINISH], "ToolCallStart while a tool call is open"),
        ([START, TextDelta("x"), END, FINISH], "TextDelta while a tool call is open"),
        ([START, ReasoningDelta("x"), END, FINISH], "ReasoningDelta while a tool call is open"),
        ([START, ARGS, FINISH], "Finish while a tool call is open"),
        ([START, USAGE, END, FINISH], "Usage while a tool call is open"),
        ([USAGE, TextDelta("late"), FINISH], "TextDelta after Usage"),
        ([USAGE, USAGE, FINISH], "Usage after Usage"),
        ([FINISH, FINISH], "Finish after Finish"),
        ([FINISH, USAGE], "Usage after Finish"),
        ([TextDelta("a")], "the stream ended without Finish"),
        ([], "the stream ended without Finish"),
    ],
)
def test_each_rule_is_named_when_broken(deltas: list[Delta], rule: str) -> None:
    with pytest.raises(EngineError) as caught:
        check(deltas)
    assert rule in caught.value.message
    assert caught.value.code == "server_error" and caught.value.status == 500


def test_a_cancelled_stream_may_stop_anywhere() -> None:
    check([TextDelta("a"), START, ARGS], cancelled=True)


def test_checked_passes_deltas_through_and_closes_the_engine_stream() -> None:
    closed = threading.Event()

    async def engine() -> AsyncGenerator[Delta, None]:
        try:
            yield TextDelta("a")
            yield TextDelta("b")
            yield FINISH
        finally:
            closed.set()

    async def first_of_checked() -> list[Delta]:
        out = []
        stream = checked(engine(), threading.Event())
        async for delta in stream:
            out.append(delta)
            break
        await stream.aclose()
        return out

    assert asyncio.run(first_of_checked()) == [TextDelta("a")]
    assert closed.is_set()


def test_a_broken_engine_fails_its_response_naming_the_rule() -> None:
    engine = ScriptedEngine()
    engine.enqueue(TextDelta("partial"), ARGS, FINISH)
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/responses", json={"input": "x", "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    assert [e["type"] for e in events][-2:] == ["response.output_item.done", "response.failed"]
    error = events[-1]["response"]["error"]
    assert error["code"] == "server_error"
    assert "ToolCallArgumentsDelta outside a tool call" in error["message"]
