"""A stream that stays silent (a long prompt being read) is kept alive on every front door:
an SSE comment on Responses (a new stream, and a background one resumed with
`starting_after`) and Chat Completions, a ping on Messages. The FAKE ScriptedEngine stands
for a slow prompt read (its delay before each step); tests/e2e/test_streaming.py shows the
same on the real model with a long prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from respond import Services, Settings, assemble, create_app
from respond.engines import _base as d
from respond.responses.sealing import Sealer
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.sse import read_events

EVERY = 0.05  # seconds of silence before a keep-alive
SLOW = 0.5  # the fake engine's pause before each step: about ten keep-alives' worth
KEEPALIVE = ": keep-alive"


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine([[d.TextDelta("late"), d.Finish("stop")]] * 4, delay=SLOW)


@pytest.fixture
def url(engine: ScriptedEngine, tmp_path: Path) -> Iterator[str]:
    store = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=600)
    services = Services(store=store, sealer=Sealer.ephemeral())
    app = create_app(assemble({engine.info.id: engine}, Settings(keepalive=EVERY), services))
    with serving(app) as base:
        yield base


def _lines(url: str, path: str, body: dict[str, Any]) -> list[str]:
    with httpx.stream("POST", f"{url}{path}", json=body, timeout=30) as reply:
        assert reply.status_code == 200
        return list(reply.iter_lines())


def _beats_before(lines: list[str], marker: str) -> int:
    first = next(i for i, line in enumerate(lines) if marker in line)
    return lines[:first].count(KEEPALIVE)


def test_responses_stream_is_kept_alive_until_the_first_token(url: str) -> None:
    lines = _lines(url, "/v1/responses", {"input": "Hi", "stream": True})
    assert _beats_before(lines, "response.output_text.delta") >= 3, lines
    assert any("response.completed" in line for line in lines)


def test_chat_stream_is_kept_alive_until_the_first_token(url: str) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "stream": True}
    lines = _lines(url, "/v1/chat/completions", body)
    assert _beats_before(lines, '"content":"late"') >= 3, lines
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]", lines[-3:]


def test_a_resumed_background_stream_is_kept_alive(url: str) -> None:
    started = httpx.post(
        f"{url}/v1/responses", json={"input": "Hi", "background": True}, timeout=30
    ).json()
    with httpx.stream(
        "GET", f"{url}/v1/responses/{started['id']}?stream=true&starting_after=1", timeout=30
    ) as reply:
        lines = list(reply.iter_lines())
    assert _beats_before(lines, "response.output_text.delta") >= 3, lines
    assert any("response.completed" in line for line in lines)


def test_keep_alives_leave_the_openai_sdk_and_the_strict_reader_whole(url: str) -> None:
    with (
        openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client,
        client.responses.stream(model="fake-scripted", input="Hi") as stream,
    ):
        final = stream.get_final_response()
    assert final.output_text == "late"
    with httpx.stream(
        "POST", f"{url}/v1/responses", json={"input": "Hi", "stream": True}, timeout=30
    ) as reply:
        types = [event["type"] for event in read_events(reply)]
    assert types[0] == "response.created" and types[-1] == "response.completed"


def test_keepalive_0_turns_them_off(engine: ScriptedEngine) -> None:
    with serving(create_app(assemble({engine.info.id: engine}, Settings(keepalive=0)))) as url:
        lines = _lines(url, "/v1/responses", {"input": "Hi", "stream": True})
    assert KEEPALIVE not in lines
    assert any("response.completed" in line for line in lines)
