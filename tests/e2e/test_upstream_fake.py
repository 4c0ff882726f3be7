"""respond in front of the scripted FAKE upstream: what a tiny real model can't do on demand.

Two real processes: tests/support/fake_upstream.py and `respond serve --config`. Each model
alias maps to one script; every response and event is validated against the spec.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import TypeAdapter

from respond.protocol.events import Event
from respond.responses.fold import fold_events
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server
from tests.support.sse import read_events
from tests.support.upstreams import start_fake, write_config

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)
CHAT = [
    "echo",
    "tools",
    "repeats",
    "reasoning",
    "think",
    "length",
    "error500",
    "cut",
    "stall",
    "slow",
    "nostream",
]
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_fake(Path(tmp_path_factory.mktemp("fake")), "a")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def respond(fake: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("respond"))
    tables = [
        f'[models.chat-{name}]\nupstream = "{fake.base_url}"\nmodel = "{name}"\n'
        "timeouts = { connect = 2, first_byte = 5, idle = 1 }\n"
        for name in [*CHAT, "schema-picky"]
    ]
    tables.append(
        f'[models.keyed]\nupstream = "{fake.base_url}"\nmodel = "echo"\napi_key = "sk-up"\n'
    )
    tables += [
        f'[models.resp-{name}]\nupstream = "{fake.base_url}"\napi = "responses"\nmodel = "{name}"\n'
        for name in ["echo", "tools", "repeats", "summary", "length", "error500", "cut"]
    ]
    config = write_config(tmp, "\n".join(tables))
    srv = start_server(tmp, "--config", str(config))
    yield srv
    srv.stop()


def create(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=30)


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=30
    ) as reply:
        assert reply.status_code == 200
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert sum(e["type"] in TERMINAL for e in events) == 1 and events[-1]["type"] in TERMINAL
    final = events[-1]["response"]
    validate_response(final)
    folded = fold_events(EVENTS.validate_python(e) for e in events)
    assert folded.model_dump(mode="json") == final
    return events


def completed(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    reply = create(server, body)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    validate_response(data)
    return data


def echoed(response: dict[str, Any]) -> dict[str, Any]:
    (message,) = [item for item in response["output"] if item["type"] == "message"]
    data: dict[str, Any] = json.loads(message["content"][0]["text"])
    return data


# ---------------------------------------------------------------- configuration


def test_models_list_backends_and_health_reports_upstreams(respond: Server, fake: Server) -> None:
    models = {m["id"]: m for m in httpx.get(f"{respond.base_url}/models").json()["data"]}
    assert models["chat-echo"]["meta"]["backend"] == "chat-completions"
    assert models["resp-echo"]["meta"]["backend"] == "responses"
    assert models["chat-echo"]["meta"]["upstreams"] == [fake.base_url]
    health = httpx.get(f"{respond.url}/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "ok"
    assert body["models"]["chat-echo"]["upstreams"][0]["ok"] is True


# ---------------------------------------------------------------- chat: request translation


def test_request_translation_reaches_the_upstream(respond: Server) -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    response = completed(
        respond,
        {
            "model": "chat-echo",
            "instructions": "Be brief.",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is here?"},
                        {"type": "input_image", "image_url": image},
                    ],
                },
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "a cat"},
            ],
            "tools": [
                {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
                {"type": "function", "name": "other", "strict": False},
            ],
            "tool_choice": {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "lookup"}],
            },
            "parallel_tool_calls": False,
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "answer",
                    "description": "the answer",
                    "schema": {"type": "object"},
                    "strict": True,
                }
            },
            "reasoning": {"effort": "low"},
            "max_output_tokens": 17,
            "top_logprobs": 2,
            "include": ["message.output_text.logprobs"],
            "temperature": 0.3,
        },
    )
    sent = echoed(response)["request"]
    assert sent["model"] == "echo"  # the upstream's name, not the alias
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is here?"},
                {"type": "image_url", "image_url": {"url": image}},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "a cat", "tool_call_id": "c1"},
    ]
    # allowed_tools is enforced by offering only the allowed tool; strict is explicit.
    assert [t["function"]["name"] for t in sent["tools"]] == ["lookup"]
    assert sent["tools"][0]["function"]["strict"] is True
    assert sent["parallel_tool_calls"] is False
    assert sent["response_format"]["json_schema"] == {
        "name": "answer",
        "description": "the answer",
        "schema": {"type": "object"},
        "strict": True,
    }
    assert sent["reasoning_effort"] == "low"
    assert sent["max_tokens"] == 17
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    assert sent["temperature"] == 0.3
    assert response["usage"]["input_tokens"] == 11 and response["usage"]["output_tokens"] == 7


def test_chat_completions_route_passes_images_through(respond: Server) -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    with openai.OpenAI(base_url=respond.base_url, api_key="none") as client:
        completion = client.chat.completions.create(
            model="chat-echo",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": image}},
                    ],
                }
            ],
        )
        sent = json.loads(completion.choices[0].message.content or "")["request"]
        assert sent["messages"][0]["content"][1] == {
            "type": "image_url",
            "image_url": {"url": image},
        }


def test_upstream_key_is_sent_as_bearer(respond: Server) -> None:
    keyed = echoed(completed(respond, {"model": "keyed", "input": "x"}))
    assert keyed["authorization"] == "Bearer sk-up"
    plain = echoed(completed(respond, {"model": "chat-echo", "input": "x"}))
    assert plain["authorization"] == ""


def test_schema_refused_upstream_gets_json_object_with_schema(respond: Server) -> None:
    body = {
        "model": "chat-schema-picky",
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
    }
    reply = create(respond, body)
    assert reply.status_code == 200, reply.text
    sent = echoed(reply.json())["request"]
    assert sent["response_format"] == {"type": "json_object", "schema": {"type": "object"}}


# ---------------------------------------------------------------- chat: what comes back


def test_interleaved_parallel_tool_calls_stream_as_well_formed_items(respond: Server) -> None:
    tools = [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {"type": "function", "name": "get_time", "parameters": {"type": "object"}},
    ]
    events = stream(respond, {"model": "chat-tools", "input": "both please", "tools": tools})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    calls = final["output"]
    assert [(c["type"], c["name"], c["call_id"], c["status"]) for c in calls] == [
        ("function_call", "get_weather", "call_a", "completed"),
        ("function_call", "get_time", "call_b", "completed"),
    ]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert json.loads(calls[1]["arguments"]) == {"tz": "UTC"}
    # Each item's events are contiguous: added, its argument deltas, done, then the next.
    per_item = [
        (e["type"], e["output_index"])
        for e in events
        if e["type"].startswith(("response.output_item", "response.function_call"))
    ]
    assert per_item == [
        ("response.output_item.added", 0),
        ("response.function_call_arguments.delta", 0),
        ("response.function_call_arguments.delta", 0),
        ("response.function_call_arguments.done", 0),
        ("response.output_item.done", 0),
        ("response.output_item.added", 1),
        ("response.function_call_arguments.delta", 1),
        ("response.function_call_arguments.delta", 1),
        ("response.function_call_arguments.done", 1),
        ("response.output_item.done", 1),
    ]


def test_openai_sdk_sees_the_function_calls(respond: Server) -> None:
    with openai.OpenAI(base_url=respond.base_url, api_key="none") as client:
        response = client.responses.create(
            model="chat-tools",
            input="both",
            tools=[
                {"type": "function", "name": "get_weather", "parameters": {}, "strict": False},
                {"type": "function", "name": "get_time", "parameters": {}, "strict": False},
            ],
        )
        assert [item.type for item in response.output] == ["function_call", "function_call"]


def test_reasoning_content_becomes_a_reasoning_item(respond: Server) -> None:
    events = stream(respond, {"model": "chat-reasoning", "input": "why?"})
    final = events[-1]["response"]
    reasoning, message = final["output"]
    assert reasoning["type"] == "reasoning"
    assert reasoning["content"][0]["text"] == "Let me think."
    assert message["content"][0]["text"] == "Answer."
    assert any(e["type"] == "response.reasoning_text.delta" for e in events)
    usage = final["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] == 16
    assert usage["output_tokens_details"]["reasoning_tokens"] == 5


def test_think_tags_become_a_reasoning_item(respond: Server) -> None:
    final = completed(respond, {"model": "chat-think", "input": "hmm"})
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["output"][0]["content"][0]["text"] == "pondering"
    assert final["output"][1]["content"][0]["text"] == "Done."


def test_upstream_that_ignores_stream_true(respond: Server) -> None:
    events = stream(respond, {"model": "chat-nostream", "input": "hi"})
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["usage"]["input_tokens"] == 11
    assert json.loads(final["output"][0]["content"][0]["text"])["request"]["stream"] is True


def test_finish_reason_length_is_incomplete(respond: Server) -> None:
    final = completed(respond, {"model": "chat-length", "input": "go"})
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["status"] == "incomplete"
    events = stream(respond, {"model": "chat-length", "input": "go"})
    assert events[-1]["type"] == "response.incomplete"


@pytest.mark.parametrize(
    ("model", "status", "code", "says"),
    [
        ("chat-error500", 502, "upstream_error", "fake upstream exploded"),
        ("chat-cut", 502, "upstream_error", "closed the stream before finishing"),
        ("chat-stall", 504, "upstream_timeout", "sent nothing for 1s"),
        ("resp-error500", 502, "upstream_error", "model crashed"),
        ("resp-cut", 502, "upstream_error", "closed the stream before its response ended"),
    ],
)
def test_upstream_failures(respond: Server, model: str, status: int, code: str, says: str) -> None:
    started = time.monotonic()
    reply = create(respond, {"model": model, "input": "x"})
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code and says in error["message"]
    assert error["type"] == "server_error"
    events = stream(respond, {"model": model, "input": "x"})
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"]["code"] == code
    assert says in failed["response"]["error"]["message"]
    # Whatever was open when the upstream failed is closed, as incomplete.
    assert all(item["status"] == "incomplete" for item in failed["response"]["output"])
    assert time.monotonic() - started < 15  # never a hang


def test_client_disconnect_aborts_the_upstream_request(respond: Server, fake: Server) -> None:
    before = httpx.get(f"{fake.url}/stats").json()["aborted"]
    with httpx.stream(
        "POST",
        f"{respond.base_url}/responses",
        json={"model": "chat-slow", "input": "x", "stream": True},
        timeout=30,
    ) as reply:
        deltas = 0
        for event in read_events(reply):
            deltas += event["type"] == "response.output_text.delta"
            if deltas == 3:
                break
    deadline = time.monotonic() + 10
    while httpx.get(f"{fake.url}/stats").json()["aborted"] == before:
        assert time.monotonic() < deadline, "the upstream kept streaming to nobody"
        time.sleep(0.1)


# ---------------------------------------------------------------- responses upstream


def test_responses_upstream_gets_full_input_without_state(respond: Server) -> None:
    events = stream(
        respond,
        {
            "model": "resp-echo",
            "instructions": "sys",
            "input": [
                {"role": "user", "content": "q1"},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "thinking"}],
                },
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
            ],
            "max_output_tokens": 30,
        },
    )
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    sent = echoed(final)["request"]
    assert sent["store"] is False and sent["stream"] is True and sent["model"] == "echo"
    # Earlier reasoning is not sent: a stateless upstream accepts only its own.
    assert [(i["role"], i["content"][0]["text"]) for i in sent["input"]] == [
        ("system", "sys"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
    ]
    assert sent["max_output_tokens"] == 30
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 4
    # Our own ids and sequence numbers, not the upstream's.
    assert final["id"] != "resp_up" and final["output"][1]["id"] != "msg_up"


def test_responses_upstream_function_call_and_incomplete(respond: Server) -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    final = completed(respond, {"model": "resp-tools", "input": "x", "tools": tools})
    (call,) = final["output"]
    assert (call["type"], call["call_id"], call["arguments"]) == (
        "function_call",
        "call_1",
        '{"city":"Oslo"}',
    )
    cut = completed(respond, {"model": "resp-length", "input": "x"})
    assert cut["status"] == "incomplete"
    assert cut["output"][0]["content"][0]["text"] == "cut sh"


@pytest.mark.parametrize("api", ["chat", "resp"])
def test_exact_repeats_of_a_call_are_dropped(respond: Server, api: str) -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    events = stream(respond, {"model": f"{api}-repeats", "input": "x", "tools": tools})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    cities = [json.loads(call["arguments"])["city"] for call in final["output"]]
    assert cities == ["Paris", "Rome"]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert len(added) == 2  # the repeat was never streamed
    assert "dropped an exact repeat of the call to 'get_weather'" in respond.log()


def test_an_upstream_reasoning_summary_streams_as_summary_events(respond: Server) -> None:
    events = stream(respond, {"model": "resp-summary", "input": "x"})
    types = [e["type"] for e in events]
    assert "response.reasoning_summary_part.added" in types
    assert "response.content_part.added" in types  # the message's only
    reasoning, message = events[-1]["response"]["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "In short: yes."}]
    assert reasoning["content"] == []
    assert message["content"][0]["text"] == "Yes."


def test_upstream_flags_serve_a_responses_upstream(fake: Server, tmp_path: Path) -> None:
    srv = start_server(tmp_path, "--upstream", fake.base_url, "--upstream-api", "responses")
    try:
        models = {m["id"]: m for m in httpx.get(f"{srv.base_url}/models").json()["data"]}
        assert models["tools"]["meta"]["backend"] == "responses"
        final = completed(srv, {"model": "tools", "input": "x", "tools": []})
        # No tools were offered, so the upstream's function call is dropped.
        assert final["output"] == [] and final["status"] == "completed"
    finally:
        srv.stop()
