"""respond in front of a REAL Chat Completions server: llama-cpp-python's own
`python -m llama_cpp.server`, serving the bundled model. Text, streaming and structured
output pass through it; every response and event is validated against the spec; and every
guarantee of upstream_guarantees.py holds (this server streams no usage, ignores
tool_choice and says its context window nowhere, so the config file gives it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import TypeAdapter

from respond.engines.llamacpp import bundled_model_path
from respond.protocol.events import Event
from respond.responses.fold import fold_events
from tests.e2e.upstream_guarantees import *  # noqa: F403  (the shared checks, collected here)
from tests.e2e.upstream_guarantees import ALIAS
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server
from tests.support.sse import read_events
from tests.support.upstreams import start_llama_cpp_server, write_config

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_llama_cpp_server(Path(tmp_path_factory.mktemp("llama")), bundled_model_path())
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def front(upstream: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("front"))
    config = f"""
[models.{ALIAS}]
upstream = "{upstream.base_url}"
model = "{bundled_model_path()}"  # the id it lists: its model file
context_window = 2048  # its --n_ctx, which it tells no client
grammars = "gbnf"  # it takes a llama.cpp grammar, and says so nowhere either
"""
    srv = start_server(tmp, "--config", str(write_config(tmp, config)))
    yield srv
    srv.stop()


def test_models_are_discovered_under_the_alias(front: Server, upstream: Server) -> None:
    entry, _embedding = httpx.get(f"{front.base_url}/models").json()["data"]
    assert entry["id"] == ALIAS
    assert entry["meta"]["backend"] == "chat-completions"
    assert entry["meta"]["upstreams"] == [upstream.base_url]
    health = httpx.get(f"{front.url}/health").json()
    assert health["status"] == "ok"
    assert health["models"][ALIAS]["upstreams"][0]["ok"] is True


def test_text_response(front: Server) -> None:
    reply = httpx.post(
        f"{front.base_url}/responses",
        json={
            "model": ALIAS,
            "instructions": "Answer in one short sentence.",
            "input": "What is the capital of France?",
            "max_output_tokens": 16,
            "temperature": 0,
        },
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["model"] == ALIAS
    assert body["status"] in ("completed", "incomplete")
    if body["status"] == "incomplete":
        assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    (message,) = body["output"]
    assert message["content"][0]["text"].strip()


def test_streaming_lifecycle(front: Server) -> None:
    with httpx.stream(
        "POST",
        f"{front.base_url}/responses",
        json={"model": ALIAS, "input": "Say hello.", "max_output_tokens": 12, "stream": True},
        timeout=120,
    ) as reply:
        assert reply.status_code == 200
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    types = [e["type"] for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    final = events[-1]["response"]
    validate_response(final)
    assert final["output"][0]["content"][0]["text"] == deltas != ""
    assert fold_events(EVENTS.validate_python(e) for e in events).model_dump(mode="json") == final


def test_structured_output_passes_through(front: Server) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
        "additionalProperties": False,
    }
    with openai.OpenAI(base_url=front.base_url, api_key="none") as client:
        response = client.responses.create(
            model=ALIAS,
            input="Name a city in France as JSON.",
            text={
                "format": {
                    "type": "json_schema",
                    "name": "city",
                    "description": "a city",
                    "schema": schema,
                    "strict": True,
                }
            },
            max_output_tokens=32,
            temperature=0,
        )
        assert response.status == "completed", response.incomplete_details
        data = json.loads(response.output_text)
        assert isinstance(data["city"], str) and set(data) == {"city"}


def test_chained_turns_are_stored_and_retrievable(front: Server) -> None:
    with openai.OpenAI(base_url=front.base_url, api_key="none") as client:
        first = client.responses.create(
            model=ALIAS, input="My name is Ada.", max_output_tokens=8, temperature=0
        )
        second = client.responses.create(
            model=ALIAS,
            input="What is my name?",
            previous_response_id=first.id,
            max_output_tokens=8,
            temperature=0,
        )
        assert second.previous_response_id == first.id
        assert second.status in ("completed", "incomplete") and second.output_text
        stored = client.responses.retrieve(second.id)
        assert stored.output_text == second.output_text
        items = client.responses.input_items.list(second.id)
        assert [item.type for item in items.data] == ["message"]
