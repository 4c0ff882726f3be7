"""Reasoning, auto tool calls and sealed reasoning through the real HTTP stack, driven by
the FAKE scripted engine (respond.testing.FakeEngine) in its own server process: what a
135M model will not produce on demand. The raw model text goes through the real parsers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.clients import openai_client
from tests.support.fake_server import recorded_turns, start_fake_server
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server
from tests.support.sse import read_events

WEATHER_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
    "\n</tool_call>"
)
SCRIPT = [
    # 0: thinking, then an answer
    [{"raw": "<think>The user says hi.\nBe brief.</think>\n\nHello there!"}],
    # 1: text, then a call the model chose to make (auto)
    [{"raw": "Let me check." + WEATHER_CALL}],
    # 2: thinking, then a call (sealed reasoning round trip, first turn)
    [{"raw": "<think>secret plan: ask the weather tool</think>" + WEATHER_CALL}],
    # 3: the answer after the tool result
    [{"text": "It is 21 degrees in Paris."}],
    # 4: a custom tool call (free-form input), written as the model sees it: a function
    [
        {
            "raw": '<tool_call>{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\\n'
            '+hi\\n*** End Patch"}}</tool_call>'
        }
    ],
    # 5: after the custom tool's output
    [{"text": "Patched."}],
]
# No "strict": the SDK's FunctionToolParam requires it, the API does not.
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    }
]


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    server, record = start_fake_server(Path(tmp_path_factory.mktemp("fake")), SCRIPT)
    yield server, record
    server.stop()


# OpenAI's custom tool call item and events are not in the Open Responses schema
# (docs/tools.md): they are checked by shape here, everything else against the spec.
CUSTOM_EVENTS = ("response.custom_tool_call_input.delta", "response.custom_tool_call_input.done")


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=30
    ) as reply:
        assert reply.status_code == 200, reply.read()
        events = list(read_events(reply))
    for event in events:
        if event["type"] in CUSTOM_EVENTS:
            assert set(event) >= {"item_id", "output_index", "sequence_number"}
        elif event.get("item", {}).get("type") != "custom_tool_call":
            validate_event(without_custom_items(event))
    validate_response(without_custom_items(events[-1])["response"])
    return events


def without_custom_items(event: dict[str, Any]) -> dict[str, Any]:
    if "response" not in event:
        return event
    output = [i for i in event["response"]["output"] if i["type"] != "custom_tool_call"]
    return {**event, "response": {**event["response"], "output": output}}


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=30)


@pytest.fixture(scope="module")
def open_responses_naming(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same fake engine served with `--reasoning-events openresponses`."""
    tmp = Path(tmp_path_factory.mktemp("fake-or"))
    server, _ = start_fake_server(tmp, SCRIPT, reasoning_events="openresponses")
    yield server
    server.stop()


@pytest.mark.parametrize(
    "naming",
    [
        ("openai", "response.reasoning_text"),  # the default
        ("openresponses", "response.reasoning"),
    ],
    ids=["openai", "openresponses"],
)
def test_reasoning_item_streams_before_the_message(
    fake: tuple[Server, Path], open_responses_naming: Server, naming: tuple[str, str]
) -> None:
    """Both namings validate: OpenAI's against the openai SDK's types, the Open Responses
    one against the spec (stream() validates every event)."""
    switch, prefix = naming
    server = fake[0] if switch == "openai" else open_responses_naming
    events = stream(server, {"model": "fake-model", "input": "hi"})
    types = [e["type"] for e in events]
    other = "response.reasoning." if switch == "openai" else "response.reasoning_text."
    assert not [kind for kind in types if kind.startswith(other)]
    first_message = types.index("response.content_part.added", types.index(f"{prefix}.done"))
    assert types[:6] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        f"{prefix}.delta",
        f"{prefix}.delta",
    ]
    assert first_message > types.index(f"{prefix}.done")
    reasoning = "".join(e["delta"] for e in events if e["type"] == f"{prefix}.delta")
    assert reasoning == "The user says hi.\nBe brief."
    done = next(e for e in events if e["type"] == f"{prefix}.done")
    assert done["text"] == reasoning
    final = events[-1]["response"]
    item, message = final["output"]
    assert item["type"] == "reasoning" and item["summary"] == []
    assert item["content"] == [{"type": "reasoning_text", "text": reasoning}]
    assert "encrypted_content" not in item
    assert message["content"][0]["text"] == "Hello there!"
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] > 0


def test_auto_call_parsed_from_markup_never_leaks(fake: tuple[Server, Path]) -> None:
    server, _ = fake
    events = stream(server, {"model": "fake-model", "input": "weather?", "tools": TOOLS})
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Let me check."
    assert "<" not in json.dumps([e for e in events if "text" in e.get("type", "")])
    added = [e for e in events if e["type"] == "response.output_item.added"]
    call = added[-1]["item"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert call["arguments"] == ""
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1  # streamed as the model wrote them
    args_done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert json.loads(args_done["arguments"]) == {"city": "Paris", "unit": "celsius"}
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["output"][1]["call_id"].startswith("call_")


def test_sealed_reasoning_round_trip_through_the_sdk(fake: tuple[Server, Path]) -> None:
    server, record = fake
    with openai_client(server.base_url) as client:
        first = client.responses.create(
            model="fake-model",
            input="weather in Paris?",
            tools=TOOLS,  # type: ignore[arg-type]
            store=False,
            include=["reasoning.encrypted_content"],
        )
        reasoning, call = first.output
        assert reasoning.type == "reasoning" and call.type == "function_call"
        sealed = reasoning.encrypted_content
        assert sealed and "secret plan" not in sealed
        replay: list[Any] = [
            {"role": "user", "content": "weather in Paris?"},
            {"type": "reasoning", "id": reasoning.id, "summary": [], "encrypted_content": sealed},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'},
        ]
        second = client.responses.create(
            model="fake-model",
            input=replay,
            tools=TOOLS,  # type: ignore[arg-type]
            store=False,
        )
        assert second.output_text == "It is 21 degrees in Paris."
        turn = recorded_turns(record)[-1]
        assistant = [m for m in turn["messages"] if m["role"] == "assistant"]
        assert assistant[0]["reasoning"] == "secret plan: ask the weather tool"
        assert assistant[0]["tool_calls"][0]["call_id"] == call.call_id

    tampered = sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB")
    for blob in (tampered, "bm90IGEgYmxvYg", "%%%"):
        reply = post(
            server,
            {"model": "fake-model", "input": [{**replay[1], "encrypted_content": blob}, replay[0]]},
        )
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == "input[0].encrypted_content"


def test_tool_output_for_an_unknown_call_is_400(fake: tuple[Server, Path]) -> None:
    server, _ = fake
    reply = post(
        server,
        {
            "model": "fake-model",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": "call_nope", "output": "x"},
            ],
        },
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "input[1].call_id"


APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}


def test_custom_tool_call_item_and_its_output_back(fake: tuple[Server, Path]) -> None:
    server, record = fake
    events = stream(
        server, {"model": "fake-model", "input": "patch it", "tools": [APPLY_PATCH, TOOLS[0]]}
    )
    (call,) = events[-1]["response"]["output"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    assert call["input"] == "*** Begin Patch\n+hi\n*** End Patch"
    assert call["status"] == "completed" and call["call_id"].startswith("call_")
    types = [e["type"] for e in events]
    assert types[2:6] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    assert "response.function_call_arguments.delta" not in types
    # Codex replays the call and its output; both reach the model.
    reply = post(
        server,
        {
            "model": "fake-model",
            "tools": [APPLY_PATCH],
            "input": [
                {"role": "user", "content": "patch it"},
                {k: call[k] for k in ("type", "call_id", "name", "input")},
                {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "ok"},
            ],
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["output"][0]["content"][0]["text"] == "Patched."
    messages = recorded_turns(record)[-1]["messages"]
    assert messages[-2]["tool_calls"][0]["name"] == "apply_patch"
    assert json.loads(messages[-2]["tool_calls"][0]["arguments"]) == {"input": call["input"]}
    assert messages[-1] == {**messages[-1], "role": "tool", "content": "ok"}
