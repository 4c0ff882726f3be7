"""The upstream pool's failover, in-process: its members are scripted by httpx.MockTransport
(a FAKE upstream: a real one cannot be made to refuse a connection on demand)."""

from __future__ import annotations

import httpx
import pytest

from respond.engines._base import EngineError
from respond.engines.upstream._pool import UpstreamHTTPError, UpstreamPool
from respond.engines.upstream._sse import SSEParser

STREAM = b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'


def scripted(answers: dict[str, int | None], calls: list[str]) -> httpx.MockTransport:
    """Each host answers its status with the STREAM; None refuses the connection."""

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        status = answers[request.url.host]
        if status is None:
            raise httpx.ConnectError("connection refused", request=request)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(status, headers=headers, content=STREAM if status < 400 else b"{}")

    return httpx.MockTransport(handle)


async def test_a_member_that_cannot_be_reached_hands_the_request_to_the_next() -> None:
    calls: list[str] = []
    transport = scripted({"down": None, "up": 200}, calls)
    pool = UpstreamPool(["http://down/v1", "http://up/v1"], transport=transport)
    try:
        async with pool.stream("/chat/completions", {"stream": True}) as upstream:
            events = [event async for event in upstream.json()]
            assert upstream.member.base_url == "http://up/v1"
        assert events == [{"n": 1}, {"n": 2}] and upstream.finished
        assert calls == ["down", "up"]  # the first call tries the members in order
        down, up = pool.members
        assert not down.healthy and down.failures == 1 and down.failovers == 1
        assert up.healthy and up.failures == 0 and up.in_flight == 0
        assert "ConnectError" in (down.last_error or "")
    finally:
        await pool.aclose()


async def test_with_every_member_down_the_error_names_each() -> None:
    calls: list[str] = []
    pool = UpstreamPool(
        ["http://a/v1", "http://b/v1"], transport=scripted({"a": None, "b": None}, calls)
    )
    try:
        with pytest.raises(EngineError) as failed:
            async with pool.stream("/chat/completions", {}):
                pass
        assert failed.value.status == 502 and failed.value.code == "upstream_error"
        assert "http://a/v1" in str(failed.value) and "http://b/v1" in str(failed.value)
        assert sorted(calls) == ["a", "b"]
    finally:
        await pool.aclose()


async def test_an_answered_error_is_not_sent_again() -> None:
    """The member received the request (a model may have run): no second member gets it."""
    calls: list[str] = []
    pool = UpstreamPool(
        ["http://a/v1", "http://b/v1"], transport=scripted({"a": 500, "b": 200}, calls)
    )
    try:
        with pytest.raises(UpstreamHTTPError) as failed:
            async with pool.stream("/chat/completions", {}):
                pass
        assert failed.value.status == 502 and failed.value.upstream_status == 500
        assert calls == ["a"] and pool.members[0].failures == 1
    finally:
        await pool.aclose()


def test_sse_payloads_survive_any_chunking() -> None:
    """Lines split anywhere, CRLF, a payload over two lines, other fields skipped, and a last
    event whose blank line never came."""
    text = b': a comment\r\nevent: x\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: two\n\ndata: last\n'
    for size in range(1, len(text) + 1):
        parser = SSEParser()
        payloads = [p for i in range(0, len(text), size) for p in parser.feed(text[i : i + size])]
        assert payloads + parser.close() == ['{"a":\n1}', "two", "last"], size
