"""The code_interpreter_call kind without a server, a model or a sandbox: its events in
OpenAI's order (checked against the openai SDK's types), the code decoded as its JSON
arguments stream, the answer's container_file_citation, a stream cut short and resumed,
and how its items replay into the model's context."""

from __future__ import annotations

import itertools
import json

import pytest
from openai.types.responses import Response
from pydantic import TypeAdapter

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import CodeInterpreterCallItem, MessageItem, OutputText
from respond.protocol.requests import CodeInterpreterCallInput, CreateResponseBody
from respond.protocol.resource import ResponseResource
from respond.protocol.tools import CodeInterpreterTool
from respond.responses.context import items_to_messages
from respond.responses.events import EventBuilder
from respond.responses.fold import fold_events
from respond.responses.hosted import CallResult, HostedTool
from respond.responses.kinds import Kinds, calls_for, echo
from respond.responses.kinds.code_interpreter_call import NOT_KEPT, partial_code
from tests.support.schema import validate_event, validate_response


class _Unused:
    async def call(self, name: str, arguments: str) -> CallResult:
        raise AssertionError("the builder never runs a call")


PYTHON = HostedTool(
    visible="python",
    server_label="code_interpreter",
    name="python",
    description=None,
    parameters={},
    needs_approval=False,
    executor=_Unused(),
    family="code_interpreter",
    container_id="cntr_1",
)
CODE = 'with open("/mnt/data/sums.csv", "w") as f:\n    f.write("n,sum\\n3,6\\n")\nprint("é 😀")'
LOGS = [{"type": "logs", "logs": "é 😀\n"}]


def builder() -> EventBuilder:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    return EventBuilder(response, kinds=Kinds(calls_for(hosted={"python": PYTHON})))


def _call(b: EventBuilder, arguments: str, pieces: int = 7) -> list[ev.Event]:
    events = b.push(d.ToolCallStart(call_id="call_1", name="python"))
    step = max(1, len(arguments) // pieces)
    for start in range(0, len(arguments), step):
        events += b.push(d.ToolCallArgumentsDelta(arguments[start : start + step]))
    return events + b.push(d.ToolCallEnd())


def test_a_call_streams_its_code_runs_and_the_answer_cites_what_it_wrote() -> None:
    b = builder()
    events = b.start()
    arguments = json.dumps({"code": CODE})  # ensure_ascii: the emoji is a surrogate pair
    events += _call(b, arguments)
    (item_id,) = b.calling  # interpreting: waiting for the run to execute it
    written = (("cntr_1", "cfile_1", "/mnt/data/sums.csv"),)
    events += b.call_done(item_id, CallResult(output="é 😀", outputs=LOGS, written=written))
    events += b.push(d.TextDelta("Saved to /mnt/data/sums.csv."))
    events += b.finish()
    types = [e.type for e in events]
    deltas = types.count("response.code_interpreter_call_code.delta")
    assert deltas > 1  # the code streamed as it was written, not at its end
    assert types[2:4] == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
    ]
    assert types[4 + deltas : 9 + deltas] == [
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    for event in events:
        validate_event(json.loads(event.model_dump_json()))
    streamed = "".join(
        e.delta for e in events if e.type == "response.code_interpreter_call_code.delta"
    )
    assert streamed == CODE
    final = b.response
    assert fold_events(events) == final
    wire = final.model_dump(mode="json")
    validate_response(wire)
    Response.model_validate(wire)  # the SDK's own type reads it whole
    call, answer = final.output
    assert isinstance(call, CodeInterpreterCallItem) and isinstance(answer, MessageItem)
    assert (call.code, call.container_id, call.status) == (CODE, "cntr_1", "completed")
    assert call.outputs == LOGS
    part = answer.content[0]
    assert isinstance(part, OutputText)
    assert part.annotations == [
        {
            "type": "container_file_citation",
            "container_id": "cntr_1",
            "file_id": "cfile_1",
            "filename": "sums.csv",
            "start_index": 9,
            "end_index": 27,
        }
    ]


def test_a_file_the_answer_does_not_name_is_cited_at_its_end() -> None:
    b = builder()
    b.start()
    _call(b, json.dumps({"code": "1"}))
    (item_id,) = b.calling
    b.call_done(item_id, CallResult(output="1", written=(("cntr_1", "cfile_2", "/mnt/data/x"),)))
    b.push(d.TextDelta("Done."))
    b.finish()
    part = b.response.output[1].content[0]  # type: ignore[union-attr]
    assert isinstance(part, OutputText)
    assert part.annotations[0]["start_index"] == part.annotations[0]["end_index"] == 5


def test_a_call_the_sandbox_stopped_fails_without_a_completed_event() -> None:
    b = builder()
    events = b.start() + _call(b, json.dumps({"code": "while True: pass"}))
    (item_id,) = b.calling
    logs = [{"type": "logs", "logs": "[Stopped]"}]
    events += b.call_done(item_id, CallResult(output="[Stopped]", outputs=logs, stopped=True))
    types = [e.type for e in events]
    assert "response.code_interpreter_call.completed" not in types
    assert b.response.output[0].status == "failed"  # type: ignore[union-attr]


def test_outputs_stay_out_unless_included_and_an_unrun_call_ends_incomplete() -> None:
    b = builder()
    b.start()
    _call(b, json.dumps({"code": "print(1)"}))
    (item_id,) = b.calling
    b.call_done(item_id, CallResult(output="1"))  # outputs None: not included
    assert b.response.output[0].outputs is None  # type: ignore[union-attr]
    other = builder()
    other.start()
    _call(other, json.dumps({"code": "print(1)"}))
    other.fail("server_error", "stopped")  # the run ended before the sandbox ran it
    item = other.response.output[0]
    assert isinstance(item, CodeInterpreterCallItem) and item.status == "incomplete"


def test_a_stream_cut_while_the_code_streams_resumes_with_the_code_so_far() -> None:
    b = builder()
    events = b.start()
    events += b.push(d.ToolCallStart(call_id="call_1", name="python"))
    events += b.push(d.ToolCallArgumentsDelta('{"code": "print(1)\\npri'))
    resumed = EventBuilder.resume(b.response, events)
    ended = resumed.fail("run_interrupted", "the process died")
    item = resumed.response.output[0]
    assert isinstance(item, CodeInterpreterCallItem)
    assert (item.code, item.status) == ("print(1)\npri", "incomplete")
    assert [e.type for e in ended][:2] == [
        "response.code_interpreter_call_code.done",
        "response.output_item.done",
    ]


@pytest.mark.parametrize(
    "code", [CODE, 'a = "\\"quoted\\""\\n', "tab\there \\u00e9 \\\\ end", "", "😀" * 3]
)
def test_every_prefix_of_the_arguments_decodes_to_a_prefix_of_the_code(code: str) -> None:
    for arguments in (json.dumps({"code": code}), json.dumps({"code": code}, ensure_ascii=False)):
        seen = [partial_code(arguments[:end]) for end in range(len(arguments) + 1)]
        assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
        assert seen[-1] == code


def test_items_replay_as_the_python_call_and_the_output_it_read() -> None:
    kept = CodeInterpreterCallInput(
        type="code_interpreter_call",
        id="ci_1",
        code="6*7",
        container_id="cntr_1",
        outputs=[
            {"type": "logs", "logs": "42\n"},
            {"type": "image", "url": "data:image/png;base64,"},
        ],
    )
    unkept = CodeInterpreterCallInput(
        type="code_interpreter_call", id="ci_2", code="1", container_id="cntr_1", outputs=None
    )
    messages = items_to_messages([kept, unkept], vision=False)
    call, result, _, second_result = messages
    assert call.role == "assistant" and call.tool_calls[0].name == "python"
    assert json.loads(call.tool_calls[0].arguments) == {"code": "6*7"}
    assert (result.role, result.tool_call_id) == ("tool", "ci_1")
    assert result.content == "42\n\n[An image was shown.]"
    assert second_result.content == NOT_KEPT


def test_the_tool_parses_into_its_class_and_is_echoed_as_given() -> None:
    tool = {"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}}
    body = CreateResponseBody.model_validate({"input": "hi", "tools": [tool]})
    (parsed,) = body.tools
    assert isinstance(parsed, CodeInterpreterTool)
    assert echo(parsed) == tool
    item = TypeAdapter(CreateResponseBody).validate_python(
        {
            "input": [
                {
                    "type": "code_interpreter_call",
                    "id": "ci_1",
                    "code": "1",
                    "container_id": "cntr_1",
                    "outputs": None,
                    "status": "completed",
                }
            ]
        }
    )
    assert isinstance(item.input, list)
    assert isinstance(item.input[0], CodeInterpreterCallInput)


def test_code_cut_by_the_token_limit_is_never_announced_as_interpreting() -> None:
    b = builder()
    events = b.start() + b.push(d.ToolCallStart(call_id="call_1", name="python"))
    events += b.push(d.ToolCallArgumentsDelta('{"code": "for i in range(3):\\n    pri'))
    events += b.push(d.ToolCallEnd(at_end=True)) + b.push(d.Finish("length"))
    assert not b.calling  # nothing for the run to execute
    events += b.finish()
    types = [e.type for e in events]
    assert "response.code_interpreter_call.interpreting" not in types
    assert types[-1] == "response.incomplete"
    item = b.response.output[0]
    assert isinstance(item, CodeInterpreterCallItem) and item.status == "incomplete"
