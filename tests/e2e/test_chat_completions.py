"""POST /v1/chat/completions from the same engine, through the openai SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.test_engine_behaviour import STORY, wait_for_generation_end
from tests.support.clients import openai_client
from tests.support.fake_server import recorded_turns, start_fake_server
from tests.support.server import Server, start_server


def test_chat_completion(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        max_tokens=8,
    )
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens
        == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


def test_chat_completion_stream_with_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="smollm2-135m",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert text
    assert finishes in (["stop"], ["length"])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens <= 6


# ---------------------------------------------------------------- the same run as /v1/responses


@pytest.fixture(scope="module")
def greedy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose defaults are temperature 0 and at most 8 output tokens."""
    srv = start_server(
        Path(tmp_path_factory.mktemp("greedy")), "--threads", "2", "--temp", "0", "-n", "8"
    )
    yield srv
    srv.stop()


def chat(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)


def test_server_defaults_apply_to_chat_completions(greedy: Server) -> None:
    body = {"messages": [{"role": "user", "content": STORY}]}
    first, second = chat(greedy, body).json(), chat(greedy, body).json()
    assert first["usage"]["completion_tokens"] == 8  # -n 8, the request sets no limit
    assert first["choices"][0]["finish_reason"] == "length"
    # Temperature 0: the same answer each time, and the same one /v1/responses gives.
    assert first["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]
    response = httpx.post(f"{greedy.base_url}/responses", json={"input": STORY}, timeout=120)
    assert (
        response.json()["output"][0]["content"][0]["text"]
        == (first["choices"][0]["message"]["content"])
    )


def test_server_defaults_apply_to_streamed_chat_completions(greedy: Server) -> None:
    with openai_client(greedy.base_url) as client:
        chunks = list(
            client.chat.completions.create(
                model="smollm2-135m",
                messages=[{"role": "user", "content": STORY}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"


def test_stream_disconnect_stops_generation(server: Server) -> None:
    since = len(server.log())
    body = {"messages": [{"role": "user", "content": STORY}], "stream": True, "max_tokens": 3000}
    with httpx.stream(
        "POST", f"{server.base_url}/chat/completions", json=body, timeout=60
    ) as reply:
        for index, _ in enumerate(reply.iter_lines()):
            if index == 6:
                break
    how, count = wait_for_generation_end(server, since)
    assert how == "cancelled"
    assert count < 40


def test_non_stream_disconnect_stops_generation(server: Server) -> None:
    since = len(server.log())
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{server.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": STORY}], "max_tokens": 3000},
            timeout=0.5,
        )
    how, _ = wait_for_generation_end(server, since)
    assert how == "cancelled"


# ---------------------------------------------------------------- reasoning and bad messages


@pytest.fixture(scope="module")
def thinker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The FAKE scripted engine (respond.testing): a model that thinks first."""
    script = [[{"raw": "<think>The user says hi.\nBe brief.</think>\n\nHello there!"}]]
    server, _ = start_fake_server(Path(tmp_path_factory.mktemp("thinker")), script)
    yield server
    server.stop()


def test_reasoning_comes_back_as_reasoning_content(thinker: Server) -> None:
    reply = chat(thinker, {"messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200, reply.text
    message = reply.json()["choices"][0]["message"]
    assert message["content"] == "Hello there!"
    assert message["reasoning_content"] == "The user says hi.\nBe brief."
    assert reply.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


def test_reasoning_streams_as_reasoning_content_deltas(thinker: Server) -> None:
    with openai_client(thinker.base_url) as client:
        chunks = list(
            client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert reasoning == "The user says hi.\nBe brief."
    assert "".join(d.content or "" for d in deltas) == "Hello there!"
    assert chunks[-1].choices[0].finish_reason == "stop"


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        (["not an object"], "messages[0]"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": [{"type": "video"}]}], "messages[0].content[0].type"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}],
            "messages[0].content[1].image_url.url",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    ],
                }
            ],
            "messages[0].content[1]",  # this model has no vision
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
            "messages[0].tool_calls[0].id",
        ),
        ([{"role": "tool", "content": "42"}], "messages[0].tool_call_id"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_other", "content": "42"},
            ],
            "messages[2].tool_call_id",  # answers no call in the conversation
        ),
    ],
)
def test_malformed_messages_are_a_400_naming_them(
    thinker: Server, messages: list[Any], param: str
) -> None:
    reply = chat(thinker, {"messages": messages})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_bad_tools_and_formats_name_the_chat_fields(thinker: Server) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tools": [{"type": "function"}]}, "tools[0].function"),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {}},
            "tool_choice",
        ),
        (
            {
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            "tool_choice.function.name",
        ),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "response_format.json_schema.schema",
        ),
    ]
    for extra, param in cases:
        reply = chat(thinker, {"messages": [{"role": "user", "content": "hi"}], **extra})
        assert reply.status_code == 400, (extra, reply.text)
        assert reply.json()["error"]["param"] == param, extra


def test_a_conversation_with_tool_calls_reaches_the_engine_as_turns(
    tmp_path: Path,
) -> None:
    server, record = start_fake_server(tmp_path, [[{"text": "Done."}]])
    try:
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "ask",
                "tool_calls": [CALL],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
        ]
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        reply = chat(server, {"messages": messages, "tools": tools, "tool_choice": "auto"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "Done."
    finally:
        server.stop()
    (turn,) = recorded_turns(record)
    sent = turn["messages"]
    assert isinstance(sent, list)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"] == [{"call_id": "call_1", "name": "f", "arguments": "{}"}]
    assert sent[2]["reasoning"] == "ask"
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_1", "21C")
    assert turn["tools"] == ["f"]
