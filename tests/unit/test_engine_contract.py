"""The Engine ABC's defaults, as a third-party engine meets them through the real server."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import httpx

from respond import assemble, create_app
from respond.engines import ChatTurn, Delta, Engine, Finish, ModelInfo, TextDelta, Usage
from tests.support.inproc import serving


class EchoEngine(Engine):
    """The smallest engine: `stream` only, every other method left to its default."""

    info = ModelInfo(id="echo", owned_by="tests", context_window=None, backend="echo")

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        yield TextDelta(turn.messages[-1].content)
        yield Usage(input_tokens=1, output_tokens=1)
        yield Finish("stop")


class BrokenLoadEngine(EchoEngine):
    """An engine whose load failed, as it reports it through the ABC."""

    info = ModelInfo(id="broken", owned_by="tests", context_window=None, backend="echo")

    @property
    def ready(self) -> bool:
        return False

    @property
    def load_error(self) -> str | None:
        return "could not load weights.gguf: file is truncated"


def test_the_smallest_engine_serves_a_response() -> None:
    engine = EchoEngine()
    assert engine.load_error is None and engine.ready
    with serving(create_app(assemble({"echo": engine}))) as url:
        reply = httpx.post(f"{url}/v1/responses", json={"input": "hello"})
    assert reply.status_code == 200
    assert reply.json()["output"][0]["content"][0]["text"] == "hello"


def test_counting_tokens_is_unsupported_by_default_with_an_error_envelope() -> None:
    with serving(create_app(assemble({"echo": EchoEngine()}))) as url:
        reply = httpx.post(f"{url}/v1/responses/input_tokens", json={"input": "hello"})
    assert reply.status_code == 501
    error = reply.json()["error"]
    assert error["code"] == "unsupported"
    assert error["message"] == "The model 'echo' cannot count input tokens."


def test_a_load_failure_is_reported_by_health_and_every_request() -> None:
    reason = "could not load weights.gguf: file is truncated"
    with serving(create_app(assemble({"broken": BrokenLoadEngine()}))) as url:
        health = httpx.get(f"{url}/health")
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        replies = [
            httpx.post(f"{url}/v1/responses", json={"input": "hello"}),
            httpx.post(f"{url}/v1/chat/completions", json=chat),
        ]
    assert health.status_code == 503
    assert health.json()["status"] == "error"
    for reply in [health, *replies]:
        assert reply.status_code == 503
        error = reply.json()["error"]
        assert error["code"] == "model_load_failed"
        # Why, and that waiting will not help (not "still loading; retry shortly").
        assert reason in error["message"]
        assert "Retrying will not help" in error["message"]


def test_a_context_window_without_a_token_count_is_a_clear_501() -> None:
    class WindowedEcho(EchoEngine):
        info = ModelInfo(id="windowed", owned_by="tests", context_window=512, backend="echo")

    with serving(create_app(assemble({"windowed": WindowedEcho()}))) as url:
        reply = httpx.post(f"{url}/v1/responses", json={"input": "hello"})
    assert reply.status_code == 501
    assert reply.json()["error"]["code"] == "unsupported"
