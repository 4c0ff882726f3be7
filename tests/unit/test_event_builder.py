"""The streaming state machine, driven without HTTP or a model."""

from __future__ import annotations

import json

import pytest

from respond.engines import _base as d
from respond.protocol.items import FunctionCallItem
from respond.protocol.resource import ResponseResource
from respond.protocol.tools import ShellTool
from respond.responses.events import EventBuilder
from respond.responses.fold import fold_events
from respond.responses.kinds import Kinds, calls_for
from tests.support.schema import validate_event


def builder() -> EventBuilder:
    return EventBuilder(
        ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    )


def run(b: EventBuilder, *deltas: d.Delta) -> list[str]:
    out = b.start()
    for delta in deltas:
        out += b.push(delta)
    out += b.finish()
    return [e.type for e in out]


def test_text_then_tool_call_items_in_order() -> None:
    b = builder()
    types = run(
        b,
        d.TextDelta("Hel"),
        d.TextDelta("lo"),
        d.ToolCallStart(call_id="call_1", name="f"),
        d.ToolCallArgumentsDelta('{"a"'),
        d.ToolCallArgumentsDelta(": 1}"),
        d.ToolCallEnd(),
        d.Usage(input_tokens=3, output_tokens=4),
        d.Finish("stop"),
    )
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in b.events] == list(range(len(types)))
    final = b.response
    assert final.status == "completed"
    assert final.output_text == "Hello"
    call = final.output[1]
    assert (
        call.type == "function_call" and call.arguments == '{"a": 1}' and call.status == "completed"
    )
    assert final.usage is not None and final.usage.total_tokens == 7
    assert fold_events(b.events) == final


def test_length_cut_marks_item_and_response_incomplete() -> None:
    b = builder()
    run(b, d.TextDelta("abc"), d.Usage(input_tokens=1, output_tokens=3), d.Finish("length"))
    assert b.response.status == "incomplete"
    assert b.response.incomplete_details is not None
    assert b.response.incomplete_details.reason == "max_output_tokens"
    assert b.response.output[0].status == "incomplete"  # type: ignore[union-attr]


def test_failure_closes_open_item_then_one_failed_event() -> None:
    b = builder()
    events = b.start() + b.push(d.ReasoningDelta("thinking")) + b.fail("server_error", "boom")
    types = [e.type for e in events]
    assert types[-4:] == [
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    assert b.response.error is not None and b.response.error.message == "boom"
    assert b.ended


def test_added_item_snapshot_is_not_mutated_by_later_deltas() -> None:
    b = builder()
    b.start()
    added = b.push(d.TextDelta("x"))[0]
    b.push(d.TextDelta("y"))
    assert added.type == "response.output_item.added"
    assert added.item.content == []  # type: ignore[union-attr]


def test_resume_continues_the_stream_and_ends_it_through_fail() -> None:
    live = builder()
    sent = live.start() + live.push(d.TextDelta("Hel"))
    resumed = EventBuilder.resume(live.response, sent[:-2])  # cut after the message was added
    assert not resumed.ended
    ending = resumed.fail("run_interrupted", "gone")
    assert [e.sequence_number for e in ending] == list(range(len(sent) - 2, len(sent)))
    assert [e.type for e in ending] == ["response.output_item.done", "response.failed"]
    assert resumed.response.output[0].status == "incomplete"  # type: ignore[union-attr]
    assert fold_events(resumed.events) == resumed.response
    again = EventBuilder.resume(resumed.response, resumed.events)
    assert again.ended  # an ended stream has nothing left to end


def test_resume_closes_open_reasoning_with_its_done_events() -> None:
    live = builder()
    sent = live.start() + live.push(d.ReasoningDelta("hmm"))
    resumed = EventBuilder.resume(live.response, sent)
    types = [e.type for e in resumed.fail("run_interrupted", "gone")]
    assert types == [
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    assert fold_events(resumed.events) == resumed.response


@pytest.mark.parametrize(
    ("naming", "prefix"),
    [("openai", "response.reasoning_text"), ("openresponses", "response.reasoning")],
)
def test_reasoning_event_names_follow_the_switch_and_fold_the_same(
    naming: str, prefix: str
) -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(reasoning_events=naming))  # type: ignore[arg-type]
    events = b.start() + b.push(d.ReasoningDelta("a")) + b.push(d.ReasoningDelta("b"))
    events += b.push(d.TextDelta("x")) + b.finish()
    types: list[str] = [e.type for e in events]
    assert types.count(f"{prefix}.delta") == 2 and f"{prefix}.done" in types
    assert fold_events(events).output[0].content[0].text == "ab"  # type: ignore[union-attr]
    for event in events:
        validate_event(json.loads(event.model_dump_json()))


@pytest.mark.parametrize("naming", ["openai", "openresponses"])
def test_a_reasoning_summary_streams_as_summary_events(naming: str) -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(reasoning_events=naming))  # type: ignore[arg-type]
    events = (
        b.start()
        + b.push(d.ReasoningDelta("thought"))
        + b.push(d.ReasoningDelta("Sh", summary=True))
    )
    events += b.push(d.ReasoningDelta("ort.", summary=True)) + b.push(d.TextDelta("x")) + b.finish()
    types = [e.type for e in events]
    summary = [t for t in types if "summary" in t]
    assert summary == [
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    ]
    assert types.index("response.reasoning_summary_part.done") < types.index(
        "response.output_item.done"
    )
    item = fold_events(events).output[0]
    assert item.model_dump(include={"summary", "content"}) == {
        "summary": [{"type": "summary_text", "text": "Short."}],
        "content": [{"type": "reasoning_text", "text": "thought"}],
    }
    assert b.response.output[0] == item
    for event in events:
        validate_event(json.loads(event.model_dump_json()))


def test_a_summary_only_reasoning_item_has_no_content_part() -> None:
    b = builder()
    events = b.start() + b.push(d.ReasoningDelta("Short.", summary=True)) + b.finish()
    types = [e.type for e in events]
    assert "response.content_part.added" not in types
    assert fold_events(events).output[0].content == []  # type: ignore[union-attr]


# A call still open when generation ended (no markup closed it) is whole only if the model
# ended its turn: cut by the token limit, it is never handed over as complete.
CUT_CALL = (
    d.ToolCallStart(call_id="call_1", name="weather"),
    d.ToolCallArgumentsDelta('{"city":'),
    d.ToolCallEnd(at_end=True),
    d.Usage(input_tokens=3, output_tokens=96),
)


def test_a_call_cut_by_the_token_limit_is_incomplete() -> None:
    b = builder()
    types = run(b, *CUT_CALL, d.Finish("length"))
    (call,) = b.response.output
    assert isinstance(call, FunctionCallItem) and call.status == "incomplete"
    assert b.response.status == "incomplete"
    assert types[-2:] == ["response.output_item.done", "response.incomplete"]
    assert "response.function_call_arguments.done" in types


def test_a_call_that_ends_with_the_turn_is_completed() -> None:
    b = builder()
    run(b, *CUT_CALL[:2], d.ToolCallArgumentsDelta('"Paris"}'), *CUT_CALL[2:], d.Finish("stop"))
    (call,) = b.response.output
    assert (call.status, call.arguments) == ("completed", '{"city":"Paris"}')  # type: ignore[union-attr]
    assert b.response.status == "completed"


def test_a_late_kind_cut_by_the_token_limit_is_left_out() -> None:
    """A shell call's item is made from its whole arguments: cut, there is no call to show."""
    calls = calls_for([ShellTool(type="shell")])
    (name,) = calls
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls))
    types = run(
        b,
        d.ToolCallStart(call_id="call_1", name=name),
        d.ToolCallArgumentsDelta('{"commands": ["ls'),
        d.ToolCallEnd(at_end=True),
        d.Finish("length"),
    )
    assert b.response.output == [] and types[-1] == "response.incomplete"
