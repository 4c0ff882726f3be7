"""Messages API behaviour the bundled model can't show on demand (it never thinks, never
crashes), driven by the FAKE ScriptedEngine over real HTTP. Bodies and events are parsed
strictly with the anthropic SDK's types (tests/support/anthropic_types.py)."""

from __future__ import annotations

from typing import Any

import anthropic.types as at
import httpx

from respond import Settings, assemble, create_app
from respond.engines import _base as d
from respond.testing import ScriptedEngine
from tests.support.anthropic_types import strict, strict_event
from tests.support.inproc import serving
from tests.support.sse import read_events

# An empty turn, ended by the rules (Usage, then Finish).
DONE: list[d.Delta] = [d.Usage(1, 0), d.Finish("stop")]
ASK: dict[str, Any] = {"max_tokens": 50, "messages": [{"role": "user", "content": "Sure?"}]}


def thinking_then_text() -> list[d.Delta]:
    return [
        d.ReasoningDelta("Let me "),
        d.ReasoningDelta("think."),
        d.TextDelta("Yes."),
        d.Usage(5, 4, reasoning_tokens=2),
        d.Finish("stop"),
    ]


def test_thinking_comes_back_with_a_sealed_signature_that_opens_again() -> None:
    engine = ScriptedEngine([thinking_then_text(), [d.TextDelta("Sure."), *DONE]])
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        first = httpx.post(f"{url}/v1/messages", json=ASK)
        assert first.status_code == 200, first.text
        message = strict(at.Message, first.json())
        thinking, text = message.content
        assert (thinking.type, thinking.thinking, text.text) == (
            "thinking",
            "Let me think.",
            "Yes.",
        )
        assert thinking.signature and "think" not in thinking.signature  # sealed, not plain
        history = [
            {"role": "user", "content": "Sure?"},
            {"role": "assistant", "content": first.json()["content"]},
            {"role": "user", "content": "Really?"},
        ]
        again = httpx.post(f"{url}/v1/messages", json={**ASK, "messages": history})
        assert again.status_code == 200, again.text
    assistant = engine.turns[1].messages[1]
    assert (assistant.role, assistant.reasoning, assistant.content) == (
        "assistant",
        "Let me think.",
        "Yes.",
    )


def test_streamed_thinking_ends_with_its_signature() -> None:
    engine = ScriptedEngine([thinking_then_text()])
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/messages", json={**ASK, "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    for event in events:
        strict_event(event)
    thinking = [e for e in events if e.get("index") == 0]
    kinds = [
        e["type"] if e["type"] != "content_block_delta" else e["delta"]["type"] for e in thinking
    ]
    assert kinds == [
        "content_block_start",
        "thinking_delta",
        "thinking_delta",
        "signature_delta",
        "content_block_stop",
    ]
    assert thinking[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_clear_thinking_drops_older_thinking_from_the_context() -> None:
    engine = ScriptedEngine([thinking_then_text(), thinking_then_text(), DONE])
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        turns = [httpx.post(f"{url}/v1/messages", json=ASK).json()["content"] for _ in range(2)]
        history = [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": turns[0]},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": turns[1]},
            {"role": "user", "content": "three"},
        ]
        edits = {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
            ]
        }
        body = {**ASK, "messages": history, "context_management": edits}
        assert httpx.post(f"{url}/v1/messages", json=body).status_code == 200
    seen = [m.reasoning for m in engine.turns[2].messages if m.role == "assistant"]
    assert seen == [None, "Let me think."]


def test_a_failure_after_the_first_byte_is_an_error_event() -> None:
    engine = ScriptedEngine([[d.TextDelta("partial "), d.EngineError("the model crashed")]])
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/messages", json={**ASK, "stream": True}) as reply,
    ):
        assert reply.status_code == 200
        events = list(read_events(reply))
    for event in events:
        strict_event(event)
    assert [e["type"] for e in events][-2:] == ["content_block_stop", "error"]
    assert events[-1]["error"] == {"type": "api_error", "message": "the model crashed"}


def test_a_failure_before_anything_streamed_is_an_error_status() -> None:
    engine = ScriptedEngine([[d.EngineError("upstream down", code="upstream_error", status=502)]])
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        reply = httpx.post(f"{url}/v1/messages", json=ASK)
    assert reply.status_code == 502
    body = strict(at.ErrorResponse, reply.json())
    assert (body.error.type, body.error.message) == ("api_error", "upstream down")


def test_thinking_config_and_effort_become_the_reasoning_effort() -> None:
    engine = ScriptedEngine([DONE, DONE, DONE, DONE])
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({"thinking": {"type": "disabled"}}, "none"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "low"),
        ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}, "xhigh"),
        ({}, None),
    ]
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        for extra, _ in cases:
            assert httpx.post(f"{url}/v1/messages", json={**ASK, **extra}).status_code == 200
    assert [t.reasoning_effort for t in engine.turns] == [effort for _, effort in cases]


def test_silence_before_the_first_token_is_filled_with_pings() -> None:
    engine = ScriptedEngine([[d.TextDelta("late"), *DONE]], delay=0.4)  # a slow prompt read
    with (
        serving(create_app(assemble({engine.info.id: engine}, Settings(keepalive=0.05)))) as url,
        httpx.stream("POST", f"{url}/v1/messages", json={**ASK, "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    for event in events:
        strict_event(event)
    types = [e["type"] for e in events]
    first_text = types.index("content_block_start")
    assert types[:2] == ["message_start", "ping"]
    assert types[2:first_text].count("ping") >= 3  # kept coming while the engine was silent
    assert types[-1] == "message_stop"
