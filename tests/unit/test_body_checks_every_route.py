"""The hostile body checks (nesting, lone surrogates, NUL) hold on every JSON route,
each answered in its API's own error envelope."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from respond import assemble, create_app
from respond.testing import ScriptedEngine
from tests.support.inproc import serving

DEEP = '{"a":' * 100 + "1" + "}" * 100
SURROGATE = '"\\ud800"'
NUL = '"a\\u0000b"'


def _messages_body(text: str) -> str:
    return '{"model":"m","max_tokens":5,"messages":[{"role":"user","content":' + text + "}]}"


def _chat_body(text: str) -> str:
    return '{"model":"m","messages":[{"role":"user","content":' + text + "}]}"


@pytest.mark.parametrize("bad", [DEEP, SURROGATE, NUL], ids=["deep", "surrogate", "nul"])
def test_messages_and_count_tokens_refuse_hostile_bodies_in_anthropics_envelope(bad: str) -> None:
    engine = ScriptedEngine()
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            reply = httpx.post(f"{url}{path}", content=_messages_body(bad))
            assert reply.status_code == 400, reply.text
            body: dict[str, Any] = reply.json()
            assert body["type"] == "error", body
            assert body["error"]["type"] == "invalid_request_error"
    assert engine.turns == []


@pytest.mark.parametrize("bad", [DEEP, SURROGATE, NUL], ids=["deep", "surrogate", "nul"])
def test_chat_refuses_hostile_bodies_in_openais_envelope(bad: str) -> None:
    engine = ScriptedEngine()
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        reply = httpx.post(f"{url}/v1/chat/completions", content=_chat_body(bad))
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error"
    assert engine.turns == []


def test_a_bug_is_a_500_in_each_apis_envelope_and_logged_as_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = ScriptedEngine()
    app = create_app(assemble({engine.info.id: engine}))

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/v1/boom", boom, methods=["POST"])
    app.add_api_route("/v1/messages/boom", boom, methods=["POST"])
    caplog.set_level("INFO", logger="respond.access")
    with serving(app) as url:
        openai = httpx.post(f"{url}/v1/boom")
        anthropic = httpx.post(f"{url}/v1/messages/boom")
    assert openai.status_code == 500
    assert openai.json()["error"]["code"] == "server_error"
    assert anthropic.status_code == 500
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "api_error"
    logged = [r.access["status"] for r in caplog.records if hasattr(r, "access")]
    assert logged == [500, 500]
