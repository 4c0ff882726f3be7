"""POST /v1/messages (the Anthropic Messages API) against the real server and bundled model.

Raw HTTP, so the wire itself is checked: every body and event is parsed strictly with the
`anthropic` SDK's own types, SSE frames are `event:` + `data:` lines, and errors use
Anthropic's envelope with a request-id header. (The SDK as a client: tests/clients.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic.types as at
import httpx
import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.anthropic_types import strict, strict_event
from tests.support.server import Server, start_server
from tests.support.sse import read_events
from tests.support.upstreams import start_fake, write_config

PROMPT = "Reply with one word: yes or no?"
BASE: dict[str, Any] = {"model": BUNDLED_ALIAS, "max_tokens": 16, "temperature": 0}
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
KEY = "messages-test-key"


def post(server: Server, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/messages", json=body, timeout=300, **kwargs)


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}/messages", json={**body, "stream": True}, timeout=300
    ) as reply:
        assert reply.status_code == 200, reply.read()
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["request-id"].startswith("req_")
        events = list(read_events(reply))
    for event in events:
        strict_event(event)
    return events


def message(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    reply = post(server, body)
    assert reply.status_code == 200, reply.text
    assert reply.headers["request-id"].startswith("req_")
    raw: dict[str, Any] = reply.json()
    strict(at.Message, raw)
    return raw


def error_of(reply: httpx.Response, status: int, kind: str) -> str:
    assert reply.status_code == status, reply.text
    body = reply.json()
    strict(at.ErrorResponse, body)
    assert body["error"]["type"] == kind, body
    assert reply.headers["request-id"] == body["request_id"]
    message: str = body["error"]["message"]
    return message


def text_of(msg: dict[str, Any]) -> str:
    return "".join(b["text"] for b in msg["content"] if b["type"] == "text")


# ---------------------------------------------------------------- answers


def test_a_message_is_the_message_object(server: Server) -> None:
    msg = message(server, {**BASE, "messages": [{"role": "user", "content": PROMPT}]})
    assert msg["id"].startswith("msg_")
    assert (msg["type"], msg["role"], msg["model"]) == ("message", "assistant", BUNDLED_ALIAS)
    assert text_of(msg)
    assert msg["stop_reason"] in ("end_turn", "max_tokens") and msg["stop_sequence"] is None
    usage = msg["usage"]
    assert usage["output_tokens"] >= 1
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] > 10


def test_the_stream_carries_the_same_message(server: Server) -> None:
    body = {**BASE, "messages": [{"role": "user", "content": PROMPT}]}
    whole = message(server, body)
    events = stream(server, body)
    types = [e["type"] for e in events]
    assert types[:3] == ["message_start", "ping", "content_block_start"]
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["content"] == []
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == text_of(whole)  # greedy decoding: the same text both ways
    delta = events[-2]
    assert delta["delta"]["stop_reason"] == whole["stop_reason"]
    assert delta["usage"]["output_tokens"] == whole["usage"]["output_tokens"]


def test_max_tokens_cuts_the_message(server: Server) -> None:
    body = {**BASE, "max_tokens": 3, "messages": [{"role": "user", "content": "Tell a story."}]}
    msg = message(server, body)
    assert msg["stop_reason"] == "max_tokens"
    assert msg["usage"]["output_tokens"] == 3


def test_stop_sequences_really_stop_and_say_which(server: Server) -> None:
    body = {
        **BASE,
        "max_tokens": 24,
        "messages": [{"role": "user", "content": "Count from 1 to 10: 1, 2, 3,"}],
    }
    free = text_of(message(server, body))
    words = free.split()
    assert len(words) >= 3, free
    stop = words[2]  # a sequence the model writes, taken from its own output
    cut = free[: free.index(stop)]
    for reply in (message(server, {**body, "stop_sequences": ["never seen", stop]}),):
        assert text_of(reply) == cut
        assert (reply["stop_reason"], reply["stop_sequence"]) == ("stop_sequence", stop)
    events = stream(server, {**body, "stop_sequences": [stop]})
    streamed = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert streamed == cut
    assert events[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": stop}


def test_system_as_blocks_and_inside_messages(server: Server) -> None:
    body = {
        **BASE,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": "The user is in Paris."},
            {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
        ],
        "metadata": {"user_id": "u-1"},
        "top_k": 40,
        "top_p": 0.9,
        "thinking": {"type": "disabled"},
        "service_tier": "auto",
    }
    assert text_of(message(server, body))


def test_count_tokens_is_the_prompt_a_message_uses(server: Server) -> None:
    body = {"model": BUNDLED_ALIAS, "messages": [{"role": "user", "content": PROMPT}]}
    reply = httpx.post(f"{server.base_url}/messages/count_tokens?beta=true", json=body)
    assert reply.status_code == 200, reply.text
    counted = strict(at.MessageTokensCount, reply.json()).input_tokens
    usage = message(server, {**BASE, **body})["usage"]
    assert counted == usage["input_tokens"] + usage["cache_read_input_tokens"]


def test_prompt_reuse_is_cache_read_input_tokens(server: Server) -> None:
    body = {**BASE, "messages": [{"role": "user", "content": "A long shared prefix. " * 20}]}
    message(server, body)
    again = message(server, body)["usage"]
    assert again["cache_read_input_tokens"] > 100
    assert again["input_tokens"] < again["cache_read_input_tokens"]


# ---------------------------------------------------------------- tools


def forced_call(server: Server) -> dict[str, Any]:
    body = {
        **BASE,
        "max_tokens": 40,
        "tools": [WEATHER],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }
    return message(server, body)


def test_a_forced_tool_call_is_a_valid_tool_use_block(server: Server) -> None:
    msg = forced_call(server)
    calls = [b for b in msg["content"] if b["type"] == "tool_use"]
    assert len(calls) == 1 and msg["stop_reason"] == "tool_use"
    call = calls[0]
    assert call["id"].startswith("toolu_") and call["name"] == "get_weather"
    assert set(call["input"]) == {"city"} and isinstance(call["input"]["city"], str)


def test_a_streamed_tool_call_sends_its_input_as_json_deltas(server: Server) -> None:
    body = {
        **BASE,
        "max_tokens": 40,
        "tools": [WEATHER],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }
    events = stream(server, body)
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["input"] == {}
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["index"] == start["index"]
    )
    assert set(json.loads(partial)) == {"city"}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_a_tool_result_round_trip(server: Server) -> None:
    call = next(b for b in forced_call(server)["content"] if b["type"] == "tool_use")
    body = {
        **BASE,
        "tools": [WEATHER],
        "messages": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [call]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call["id"],
                        "content": [{"type": "text", "text": "Sunny, 21 C"}],
                    },
                    {"type": "text", "text": "Summarize."},
                ],
            },
        ],
        "tool_choice": {"type": "none"},
    }
    msg = message(server, body)
    assert text_of(msg) and msg["stop_reason"] in ("end_turn", "max_tokens")


def test_a_tool_result_for_an_unknown_call_is_a_400(server: Server) -> None:
    content = [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]
    reply = post(server, {**BASE, "messages": [{"role": "user", "content": content}]})
    assert "toolu_nope" in error_of(reply, 400, "invalid_request_error")


def test_a_server_tool_is_a_400_naming_its_type(server: Server) -> None:
    tools = [WEATHER, {"type": "web_search_20250305", "name": "web_search"}]
    reply = post(server, {**BASE, "tools": tools, "messages": [{"role": "user", "content": "x"}]})
    assert "web_search_20250305" in error_of(reply, 400, "invalid_request_error")


# ---------------------------------------------------------------- thinking and media


def test_a_tampered_thinking_signature_is_a_400(server: Server) -> None:
    assistant = [
        {"type": "thinking", "thinking": "hm", "signature": "forged"},
        {"type": "text", "text": "Yes."},
    ]
    body = {
        **BASE,
        "messages": [
            {"role": "user", "content": PROMPT},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": "Sure?"},
        ],
    }
    assert "signature" in error_of(post(server, body), 400, "invalid_request_error")
    redacted = [{"type": "redacted_thinking", "data": "forged"}]
    body["messages"][1]["content"] = redacted
    assert "signature" in error_of(post(server, body), 400, "invalid_request_error")


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
        },
    ],
)
def test_images_and_pdfs_on_a_text_only_model_are_a_400(
    server: Server, block: dict[str, Any]
) -> None:
    body = {
        **BASE,
        "messages": [{"role": "user", "content": [block, {"type": "text", "text": "?"}]}],
    }
    assert "messages.0.content.0" in error_of(post(server, body), 400, "invalid_request_error")


def test_a_plain_text_document_is_read(server: Server) -> None:
    doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Paris is sunny."},
    }
    body = {
        **BASE,
        "messages": [{"role": "user", "content": [doc, {"type": "text", "text": PROMPT}]}],
    }
    assert text_of(message(server, body))


# ---------------------------------------------------------------- errors


def test_errors_use_anthropics_envelope(server: Server) -> None:
    missing = post(server, {"model": BUNDLED_ALIAS, "messages": [{"role": "user", "content": "x"}]})
    assert "max_tokens" in error_of(missing, 400, "invalid_request_error")
    unknown = post(
        server, {**BASE, "model": "claude-nope", "messages": [{"role": "user", "content": "x"}]}
    )
    assert "claude-nope" in error_of(unknown, 404, "not_found_error")
    role = post(server, {**BASE, "messages": [{"role": "tool", "content": "x"}]})
    error_of(role, 400, "invalid_request_error")
    bad_json = httpx.post(f"{server.base_url}/messages", content=b"{nope", timeout=30)
    error_of(bad_json, 400, "invalid_request_error")
    no_route = httpx.post(f"{server.base_url}/messages/nope", json={}, timeout=30)
    error_of(no_route, 404, "not_found_error")
    # The OpenAI routes keep the OpenAI envelope.
    openai_style = httpx.post(f"{server.base_url}/responses", json={"model": "claude-nope"})
    assert openai_style.status_code == 404 and "type" in openai_style.json()["error"]
    assert "request-id" not in openai_style.headers


def test_a_prompt_longer_than_the_context_says_by_how_much(server: Server) -> None:
    body = {**BASE, "messages": [{"role": "user", "content": "word " * 5000}]}
    message_text = error_of(post(server, body), 400, "invalid_request_error")
    assert message_text.startswith("prompt is too long: ")
    assert "tokens > 4095 maximum" in message_text


# ---------------------------------------------------------------- keys, disconnects


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("messages-keyed")), "--threads", "2", "--api-key", KEY
    )
    yield srv
    srv.stop()


def test_x_api_key_and_bearer_both_authenticate(keyed: Server) -> None:
    body = {"model": BUNDLED_ALIAS, "messages": [{"role": "user", "content": PROMPT}]}
    url = f"{keyed.base_url}/messages/count_tokens"
    versions = {"anthropic-version": "2023-06-01", "anthropic-beta": "no-such-beta-2099-01-01"}
    assert httpx.post(url, json=body, headers={"x-api-key": KEY, **versions}).status_code == 200
    bearer = {"authorization": f"Bearer {KEY}"}
    assert httpx.post(url, json=body, headers=bearer).status_code == 200
    wrong = httpx.post(url, json=body, headers={"x-api-key": "wrong"})
    error_of(wrong, 401, "authentication_error")
    missing = httpx.post(url, json=body)
    assert "x-api-key" in error_of(missing, 401, "authentication_error")
    # x-api-key is the Messages API's header only.
    other = httpx.get(f"{keyed.base_url}/models", headers={"x-api-key": KEY})
    assert other.status_code == 401


def test_a_client_that_hangs_up_stops_generation(keyed: Server) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "max_tokens": 2000,
        "stream": True,
        "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
    }
    with httpx.stream(
        "POST", f"{keyed.base_url}/messages", json=body, headers={"x-api-key": KEY}, timeout=300
    ) as reply:
        for event in read_events(reply):
            if event["type"] == "content_block_delta":
                break
    deadline = time.monotonic() + 120
    while "generation cancelled" not in keyed.log():
        assert time.monotonic() < deadline, keyed.log()[-2000:]
        time.sleep(0.2)
    line = next(x for x in keyed.log().splitlines() if "generation cancelled" in x)
    assert int(line.split("after ")[1].split()[0]) < 2000
    assert "POST /v1/messages 200" in keyed.log()  # in the access log like any request


# ---------------------------------------------------------------- upstream engines


@pytest.fixture(scope="module")
def fronted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """respond in front of the scripted FAKE upstream (tests/support/fake_upstream.py):
    thinking and parallel tool calls a tiny real model can't produce on demand."""
    tmp = Path(tmp_path_factory.mktemp("messages-upstream"))
    fake = start_fake(tmp / "fake", "a")
    tables = [
        f'[models.chat-{name}]\nupstream = "{fake.base_url}"\nmodel = "{name}"\n'
        for name in ("tools", "reasoning", "think", "error500")
    ]
    tables.append(
        f'[models.resp-tools]\nupstream = "{fake.base_url}"\napi = "responses"\nmodel = "tools"\n'
    )
    srv = start_server(tmp, "--config", str(write_config(tmp, "\n".join(tables))))
    yield srv
    srv.stop()
    fake.stop()


def ask(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "both please"}],
    }


@pytest.mark.parametrize(
    ("model", "calls"),
    [
        ("chat-tools", [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "UTC"})]),
        ("resp-tools", [("get_weather", {"city": "Oslo"})]),
    ],
)
def test_tool_calls_from_an_upstream_are_tool_use_blocks(
    fronted: Server, model: str, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    tools = [
        {"name": "get_weather", "input_schema": {"type": "object"}},
        {"name": "get_time", "input_schema": {"type": "object"}},
    ]
    msg = message(fronted, {**ask(model), "tools": tools})
    assert [(b["type"], b["name"], b["input"]) for b in msg["content"]] == [
        ("tool_use", name, arguments) for name, arguments in calls
    ]
    assert all(b["id"].startswith("toolu_") for b in msg["content"])
    assert msg["stop_reason"] == "tool_use"


def test_reasoning_content_from_an_upstream_is_a_signed_thinking_block(fronted: Server) -> None:
    msg = message(fronted, ask("chat-reasoning"))
    thinking, text = msg["content"]
    assert (thinking["type"], thinking["thinking"], text["text"]) == (
        "thinking",
        "Let me think.",
        "Answer.",
    )
    assert thinking["signature"]
    assert msg["usage"]["cache_read_input_tokens"] == 16
    history = [
        *ask("chat-reasoning")["messages"],
        {"role": "assistant", "content": msg["content"]},
        {"role": "user", "content": "and?"},
    ]
    assert post(fronted, {**ask("chat-reasoning"), "messages": history}).status_code == 200
    events = stream(fronted, ask("chat-reasoning"))
    first = [e for e in events if e.get("index") == 0]
    kinds = [e["delta"]["type"] if "delta" in e else e["type"] for e in first]
    assert kinds[0] == "content_block_start" and "thinking_delta" in kinds
    assert kinds[-2:] == ["signature_delta", "content_block_stop"]


def test_think_tags_from_an_upstream_are_a_thinking_block(fronted: Server) -> None:
    msg = message(fronted, ask("chat-think"))
    assert [(b["type"], b.get("thinking") or b.get("text")) for b in msg["content"]] == [
        ("thinking", "pondering"),
        ("text", "Done."),
    ]


def test_an_upstream_failure_is_an_api_error(fronted: Server) -> None:
    error_of(post(fronted, ask("chat-error500")), 502, "api_error")
    events = stream(fronted, ask("chat-error500"))
    assert [e["type"] for e in events] == ["message_start", "ping", "error"]
    assert events[-1]["error"]["type"] == "api_error"
