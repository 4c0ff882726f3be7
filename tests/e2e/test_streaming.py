"""The streaming lifecycle over real HTTP, checked event by event against the spec."""

from __future__ import annotations

from typing import Any

import httpx
import openai
from pydantic import TypeAdapter

from respond.protocol.events import Event
from respond.responses.fold import fold_events
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server
from tests.support.sse import read_events

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=120
    ) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        return list(read_events(reply))


def test_lifecycle_order_and_schema(server: Server) -> None:
    events = stream(server, {"input": "Say hello.", "max_output_tokens": 24, "temperature": 0})
    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    assert types[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert types[-4:-1] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert (
        sum(t in ("response.completed", "response.incomplete", "response.failed") for t in types)
        == 1
    )
    added = events[2]["item"]
    assert added["status"] == "in_progress" and added["content"] == []
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["text"] == deltas
    final = events[-1]["response"]
    validate_response(final)
    assert final["output"][0]["id"] == added["id"] == events[-2]["item"]["id"]
    assert final["output"][0]["content"][0]["text"] == deltas
    # Folding the events reproduces the final response exactly.
    folded = fold_events(EVENTS.validate_python(e) for e in events)
    assert folded.model_dump(mode="json") == final


def test_output_item_done_is_not_batched_at_the_end(server: Server) -> None:
    events = stream(server, {"input": "Count to five.", "max_output_tokens": 16})
    types = [e["type"] for e in events]
    # The item closes before the terminal event, right after its content closes.
    assert types.index("response.output_item.done") == len(types) - 2


def test_openai_sdk_stream_helper(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model="smollm2-135m", input="Say hi.", max_output_tokens=200, temperature=0
    ) as stream:
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.status in ("completed", "incomplete")
    assert final.output_text == "".join(texts)


def test_openai_sdk_create_stream_true(client: openai.OpenAI) -> None:
    events = list(
        client.responses.create(model="smollm2-135m", input="Hi", max_output_tokens=8, stream=True)
    )
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")


def test_openai_sdk_create(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="smollm2-135m",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Name a color."}]}],
        max_output_tokens=16,
        metadata={"case": "sdk"},
        temperature=0.2,
    )
    assert response.output_text
    assert response.metadata == {"case": "sdk"}
    assert response.temperature == 0.2
