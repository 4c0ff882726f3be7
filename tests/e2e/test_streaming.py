"""The streaming lifecycle over real HTTP, checked event by event against the spec."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from pydantic import TypeAdapter

from respond.engines.llamacpp import BUNDLED_ALIAS
from respond.protocol.events import Event
from respond.responses.fold import fold_events
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server
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


# A prompt of about 1,800 tokens read by one thread: many seconds of prefill, with nothing to
# send until the first token. Each request's prompt starts differently so that none is
# served from another's prompt cache.
LONG = " ".join(f"item {i} is a plain word list entry." for i in range(150))
# About 600 tokens: seconds of prefill on one thread, twenty beats of --keepalive 0.1.
MEDIUM = LONG[: len(LONG) // 3]
KEEPALIVE_LINES = (": keep-alive", "event: ping")


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One thread, small batches: a long prompt takes seconds and many steps to read."""
    srv = start_server(
        tmp_path_factory.mktemp("slow"),
        *("--threads", "1", "-c", "8192", "-np", "2", "-b", "256", "--keepalive", "0.1"),
    )
    yield srv
    srv.stop()


def _lines(server: Server, path: str, body: dict[str, Any]) -> list[str]:
    with httpx.stream("POST", f"{server.url}{path}", json=body, timeout=300) as reply:
        assert reply.status_code == 200, reply.read()
        return list(reply.iter_lines())


def test_a_long_prefill_is_kept_alive_on_every_front_door(slow_server: Server) -> None:
    bodies = {
        "/v1/responses": {
            "input": f"Responses. {MEDIUM}",
            "max_output_tokens": 8,
            "stream": True,
        },
        "/v1/chat/completions": {
            "messages": [{"role": "user", "content": f"Chat. {MEDIUM}"}],
            "max_tokens": 8,
            "stream": True,
        },
        "/v1/messages": {
            "model": BUNDLED_ALIAS,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": f"Messages. {MEDIUM}"}],
            "stream": True,
        },
    }
    for path, body in bodies.items():
        lines = _lines(slow_server, path, body)
        # Eight tokens take a fraction of the prefill's seconds: the beats fill the prefill.
        assert sum(line in KEEPALIVE_LINES for line in lines) >= 2, (path, lines[:12])


def _first_token_at(server: Server, body: dict[str, Any], started: float) -> float:
    """When the first text delta of a streamed response arrived (seconds after `started`)."""
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=300) as reply:
        for event in read_events(reply):
            if event["type"] == "response.output_text.delta":
                return time.monotonic() - started
    raise AssertionError("no text came")


def test_a_short_request_is_answered_while_a_long_prompt_is_read(slow_server: Server) -> None:
    """The scheduler reads the prompt with the fewest tokens left first: a short request
    that arrives after a long prompt gets its first token before the long one does."""
    long = {"input": f"Long. {LONG}", "max_output_tokens": 4, "stream": True}
    short = {"input": "Say hi.", "max_output_tokens": 4, "stream": True}
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        long_first = pool.submit(_first_token_at, slow_server, long, started)
        time.sleep(0.5)  # the long prompt is being read
        short_first = pool.submit(_first_token_at, slow_server, short, started)
        assert short_first.result() < long_first.result()
