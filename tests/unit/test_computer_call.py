"""The computer_call kind (the `computer_use_preview` tool), without a server or a model:
its function, its events, the item the openai SDK parses, and its replay."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from openai.types.responses import Response, ResponseComputerToolCall, ResponseStreamEvent
from pydantic import TypeAdapter

from respond.engines import _base as d
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody, InputItem
from respond.protocol.resource import ResponseResource
from respond.responses.context import items_to_messages
from respond.responses.events import EventBuilder
from respond.responses.kinds import Kinds, calls_for, echo, shown
from respond.responses.kinds.computer_call import MAX_BATCH
from respond.responses.tools import check_call_ids, tool_choice

EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
TOOL = {
    "type": "computer_use_preview",
    "display_width": 1024,
    "display_height": 768,
    "environment": "browser",
}
SCREEN = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
# One of each action, as OpenAI's types define them.
ACTIONS: list[dict[str, Any]] = [
    {"type": "click", "button": "left", "x": 10, "y": 20},
    {"type": "double_click", "x": 1, "y": 2},
    {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 5, "y": 5}]},
    {"type": "keypress", "keys": ["CTRL", "L"]},
    {"type": "move", "x": 3, "y": 4},
    {"type": "screenshot"},
    {"type": "scroll", "x": 5, "y": 6, "scroll_x": 0, "scroll_y": -300},
    {"type": "type", "text": "hello"},
    {"type": "wait"},
]


def body(**extra: Any) -> CreateResponseBody:
    return CreateResponseBody.model_validate({"tools": [TOOL], **extra})


def test_the_model_sees_a_function_whose_arguments_are_the_action() -> None:
    seen = shown(body().tools[0])
    assert seen is not None and seen.spec.name == "computer" and seen.spec.strict
    schema = dict(seen.spec.parameters)
    for action in ACTIONS:
        jsonschema.validate(action, schema)  # every action OpenAI defines is allowed
    for wrong in (
        {"type": "click", "button": "left", "x": 1024, "y": 0},  # off the display
        {"type": "launch"},
        {"type": "type", "text": "x", "extra": 1},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


@pytest.mark.parametrize("action", ACTIONS, ids=[a["type"] for a in ACTIONS])
def test_a_call_is_a_computer_call_item_the_sdk_parses(action: dict[str, Any]) -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls_for(body().tools)))
    events = b.start() + b.push(d.ToolCallStart(call_id="call_1", name="computer"))
    events += b.push(d.ToolCallArgumentsDelta(json.dumps(action))) + b.push(d.ToolCallEnd())
    events += b.finish()
    assert [e.type for e in events][2:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    for event in events:
        EVENTS.validate_python(event.model_dump(mode="json"))
    final = Response.model_validate(b.response.model_dump(mode="json"))
    (call,) = final.output
    assert isinstance(call, ResponseComputerToolCall)
    assert call.action is not None and call.action.model_dump(exclude_none=True) == action
    assert call.call_id == "call_1" and call.status == "completed"
    assert call.pending_safety_checks == []


def test_it_is_forced_by_its_type_and_echoed() -> None:
    request = body(tool_choice={"type": "computer_use_preview"})
    seen = shown(request.tools[0])
    assert seen is not None
    assert tool_choice(request, [seen.spec]).allowed == ("computer",)
    assert echo(request.tools[0]) == TOOL


def replayed(vision: bool, output: dict[str, Any]) -> list[d.ChatMessage]:
    items: list[InputItem] = CreateResponseBody.model_validate(
        {
            "input": [
                {"role": "user", "content": "open the docs"},
                {
                    "type": "computer_call",
                    "call_id": "call_1",
                    "action": ACTIONS[0],
                    "pending_safety_checks": [],
                    "status": "completed",
                },
                {
                    "type": "computer_call_output",
                    "call_id": "call_1",
                    "output": output,
                    "acknowledged_safety_checks": [],
                },
            ]
        }
    ).input  # type: ignore[assignment]
    return items_to_messages(items, vision=vision)


def test_the_call_and_its_screenshot_replay() -> None:
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
    _, assistant, result = replayed(False, screenshot)
    (call,) = assistant.tool_calls
    assert (call.name, call.call_id) == ("computer", "call_1")
    assert json.loads(call.arguments) == ACTIONS[0]
    assert result.role == "tool" and result.tool_call_id == "call_1" and not result.images
    assert "screenshot" in result.content
    # A vision model sees the screenshot itself.
    *_, seen = replayed(True, screenshot)
    assert seen.images == ("data:image/png;base64,AAAA",)


def test_an_output_that_answers_no_call_is_refused() -> None:
    request = CreateResponseBody.model_validate(
        {
            "input": [
                {
                    "type": "computer_call_output",
                    "call_id": "call_x",
                    "output": {"type": "computer_screenshot", "file_id": "file_1"},
                }
            ]
        }
    )
    assert not isinstance(request.input, str)
    with pytest.raises(APIError) as caught:
        check_call_ids(request.input)
    assert caught.value.param == "input[0].call_id"


# ---------------------------------------------------------------- the GA `computer` tool

GA = {"type": "computer"}


def ga_body(**extra: Any) -> CreateResponseBody:
    return CreateResponseBody.model_validate({"tools": [GA], **extra})


def test_the_ga_tool_is_a_function_taking_a_batch_of_actions() -> None:
    seen = shown(ga_body().tools[0])
    assert seen is not None and seen.spec.name == "computer" and seen.spec.strict
    schema = dict(seen.spec.parameters)
    jsonschema.validate({"actions": ACTIONS[:MAX_BATCH]}, schema)  # every action, in batches
    jsonschema.validate({"actions": ACTIONS[MAX_BATCH:]}, schema)
    wrongs: list[dict[str, Any]] = [
        {"actions": []},
        {"actions": [ACTIONS[0]] * (MAX_BATCH + 1)},
        {"actions": [{"type": "launch"}]},
        ACTIONS[0],  # one action, as the preview tool takes it
    ]
    for wrong in wrongs:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_a_ga_call_is_a_computer_call_with_actions_the_sdk_parses() -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls_for(ga_body().tools)))
    batch = {"actions": [ACTIONS[0], ACTIONS[7], ACTIONS[5]]}
    events = b.start() + b.push(d.ToolCallStart(call_id="call_1", name="computer"))
    events += b.push(d.ToolCallArgumentsDelta(json.dumps(batch))) + b.push(d.ToolCallEnd())
    events += b.finish()
    for event in events:
        EVENTS.validate_python(event.model_dump(mode="json"))
    dumped = b.response.model_dump(mode="json")
    assert "action" not in dumped["output"][0]  # OpenAI's GA item carries only the batch
    (call,) = Response.model_validate(dumped).output
    assert isinstance(call, ResponseComputerToolCall) and call.actions is not None
    assert [a.model_dump(exclude_none=True) for a in call.actions] == batch["actions"]
    assert call.status == "completed" and call.pending_safety_checks == []


def test_the_ga_tool_is_forced_by_its_type_and_echoed() -> None:
    request = ga_body(tool_choice={"type": "computer"})
    seen = shown(request.tools[0])
    assert seen is not None
    assert tool_choice(request, [seen.spec]).allowed == ("computer",)
    assert echo(request.tools[0]) == GA


def test_a_batch_replays_as_the_model_wrote_it() -> None:
    batch = [ACTIONS[3], ACTIONS[5]]
    items: list[InputItem] = CreateResponseBody.model_validate(
        {
            "input": [
                {"role": "user", "content": "reload"},
                {"type": "computer_call", "call_id": "call_1", "actions": batch},
                {"type": "computer_call_output", "call_id": "call_1", "output": SCREEN},
            ]
        }
    ).input  # type: ignore[assignment]
    _, assistant, result = items_to_messages(items, vision=False)
    (call,) = assistant.tool_calls
    assert json.loads(call.arguments) == {"actions": batch}
    assert result.tool_call_id == "call_1"


@pytest.mark.parametrize(
    "fields",
    [{}, {"action": ACTIONS[0], "actions": [ACTIONS[0]]}, {"actions": []}],
    ids=["neither", "both", "empty-batch"],
)
def test_a_computer_call_input_needs_an_action_or_a_batch(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="action"):
        CreateResponseBody.model_validate(
            {"input": [{"type": "computer_call", "call_id": "call_1", **fields}]}
        )
