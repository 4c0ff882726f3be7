"""HTTP behaviour a real model can't show on demand, driven by the FAKE ScriptedEngine."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from respond import assemble, create_app
from respond.engines import _base as d
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.schema import validate_event, validate_response
from tests.support.sse import read_events


def test_health_is_503_while_the_model_loads_then_ok() -> None:
    gate = threading.Event()
    engine = ScriptedEngine(gate=gate)
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        loading = httpx.get(f"{url}/health")
        assert loading.status_code == 503
        assert loading.json()["error"]["code"] == "model_loading"
        busy = httpx.post(f"{url}/v1/responses", json={"input": "x"})
        assert busy.status_code == 503
        assert busy.json()["error"]["code"] == "model_loading"
        gate.set()
        for _ in range(100):
            if httpx.get(f"{url}/health").status_code == 200:
                break
            threading.Event().wait(0.05)
        assert httpx.get(f"{url}/health").json() == {"status": "ok"}


def test_error_mid_stream_closes_items_then_one_failed_event() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("partial "), d.EngineError("the model crashed", code="server_error"))
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/responses", json={"input": "x", "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    types = [e["type"] for e in events]
    assert types[-2:] == ["response.output_item.done", "response.failed"]
    assert events[-2]["item"]["status"] == "incomplete"
    failed = events[-1]["response"]
    validate_response(failed)
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "the model crashed"}


def test_error_without_stream_is_an_error_envelope() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.EngineError("upstream said no", code="upstream_error", status=502))
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        reply = httpx.post(f"{url}/v1/responses", json={"input": "x"})
    assert reply.status_code == 502
    assert reply.json()["error"]["message"] == "upstream said no"


def test_unexpected_bug_still_ends_the_stream() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("a"), RuntimeError("a bug"))
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/responses", json={"input": "x", "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"


# ---------------------------------------------------------------- Chat Completions


def chat_frames(reply: httpx.Response) -> list[Any]:
    """A chat stream's `data:` frames, parsed ("[DONE]" kept as the string)."""
    frames: list[Any] = []
    for line in reply.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            frames.append(data if data == "[DONE]" else json.loads(data))
    return frames


def test_chat_error_mid_stream_is_an_error_frame_then_done() -> None:
    engine = ScriptedEngine()
    engine.enqueue(
        d.TextDelta("partial "),
        d.EngineError("upstream fell over", code="upstream_error", status=502),
    )
    body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/chat/completions", json=body) as reply,
    ):
        assert reply.status_code == 200
        frames = chat_frames(reply)
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert frames[1]["choices"][0]["delta"] == {"content": "partial "}
    assert frames[-2] == {
        "error": {
            "message": "upstream fell over",
            "type": "server_error",
            "param": None,
            "code": "upstream_error",
        }
    }
    assert frames[-1] == "[DONE]"


def test_chat_error_without_stream_keeps_the_status_and_envelope() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.EngineError("upstream said no", code="upstream_error", status=502))
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        reply = httpx.post(
            f"{url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}
        )
        loading = ScriptedEngine(gate=threading.Event())
        with serving(create_app(assemble({loading.info.id: loading}))) as second:
            busy = httpx.post(
                f"{second}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "x"}]},
            )
            # Before the server stops: its shutdown waits for the load to end.
            loading._gate.set()  # type: ignore[union-attr]
    assert reply.status_code == 502
    assert reply.json()["error"]["code"] == "upstream_error"
    assert busy.status_code == 503 and busy.json()["error"]["code"] == "model_loading"


def test_chat_stream_translates_tool_calls_and_reasoning() -> None:
    engine = ScriptedEngine()
    engine.enqueue(
        d.ReasoningDelta("think"),
        d.ToolCallStart(call_id="call_a", name="f"),
        d.ToolCallArgumentsDelta('{"x":'),
        d.ToolCallArgumentsDelta("1}"),
        d.ToolCallEnd(),
        d.ToolCallStart(call_id="call_b", name="g"),
        d.ToolCallEnd(),
        d.Usage(input_tokens=3, output_tokens=5, reasoning_tokens=1),
        d.Finish("stop"),
    )
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in ("f", "g")
    ]
    body = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": tools,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with (
        serving(create_app(assemble({engine.info.id: engine}))) as url,
        httpx.stream("POST", f"{url}/v1/chat/completions", json=body) as reply,
    ):
        frames = chat_frames(reply)
    deltas = [f["choices"][0]["delta"] for f in frames[:-2] if f["choices"]]
    assert deltas[1] == {"reasoning_content": "think"}
    assert deltas[2]["tool_calls"] == [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": ""}}
    ]
    arguments = "".join(
        call["function"]["arguments"]
        for delta in deltas
        for call in delta.get("tool_calls", [])
        if call["index"] == 0
    )
    assert arguments == '{"x":1}'
    assert deltas[-2]["tool_calls"][0]["index"] == 1 and deltas[-1] == {}
    assert frames[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert len({f["id"] for f in frames[:-1]}) == 1  # one completion id throughout
    assert frames[-2]["choices"] == [] and frames[-2]["usage"]["total_tokens"] == 8
    assert frames[-2]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}
    assert frames[-1] == "[DONE]"
