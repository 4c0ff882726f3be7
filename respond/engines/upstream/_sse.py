"""Reading an upstream's answer: Server-Sent Events, parsed as bytes arrive, under the chunk
timeouts (first byte, idle) and the turn's cancel flag."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from respond._config import Timeouts
from respond.engines.upstream._errors import describe, upstream_error


class Member(Protocol):
    """The pool member a stream comes from (the pool's Member): named in errors."""

    base_url: str


__all__ = ["SSEParser", "UpstreamStream"]


class SSEParser:
    """SSE bytes in, each event's `data:` payload out (its lines joined with newlines).

    Chunks may split lines anywhere; CRLF ends a line as LF does; other fields (event:, id:,
    comments) are skipped, as respond's upstreams put everything in data.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._pending: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        """The payloads of the events `chunk` completes."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        done: list[str] = []
        for raw in lines:
            line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
            if line.startswith("data:"):
                self._pending.append(line[5:].removeprefix(" "))
            elif not line and self._pending:
                done.append("\n".join(self._pending))
                self._pending = []
        return done

    def close(self) -> list[str]:
        """At the end of the stream: the last event, if it lacked its blank line."""
        pending, self._pending = self._pending, []
        return ["\n".join(pending)] if pending else []


class UpstreamStream:
    """An open upstream response, read as SSE `data:` payloads under the chunk timeouts.

    Setting ``cancel`` ends the stream quietly at once, even while a chunk is awaited:
    a watcher moves the pending read's deadline to now.
    """

    def __init__(
        self,
        response: httpx.Response,
        member: Member,
        timeouts: Timeouts,
        cancel: threading.Event | None = None,
        *,
        first_chunk: float | None = None,
    ) -> None:
        self.response = response
        self.member = member
        self.timeouts = timeouts
        self.first_chunk = timeouts.first_byte if first_chunk is None else first_chunk
        self.cancel = cancel or threading.Event()
        self.finished = False  # the upstream sent its end marker ([DONE])
        self._deadline: asyncio.Timeout | None = None

    async def data(self) -> AsyncIterator[str]:
        """Each SSE event's data, joined across lines; ends at [DONE] or end of stream."""
        watcher = asyncio.ensure_future(self._watch_cancel())
        try:
            async for payload in self._events():
                if payload == "[DONE]":
                    self.finished = True
                    return
                yield payload
        finally:
            watcher.cancel()

    async def _events(self) -> AsyncIterator[str]:
        chunks = self.response.aiter_bytes()
        limit = self.first_chunk
        parser = SSEParser()
        while True:
            chunk = await self._next(chunks, limit)
            limit = self.timeouts.idle
            if chunk is None:
                if not self.cancel.is_set():
                    for payload in parser.close():
                        yield payload
                return
            for payload in parser.feed(chunk):
                yield payload

    async def read_json(self) -> dict[str, Any]:
        """The whole body as one JSON object (a non-streamed answer), under the idle timeout."""
        try:
            async with asyncio.timeout(self.first_chunk):
                raw = await self.response.aread()
            value = json.loads(raw)
        except TimeoutError as exc:
            raise upstream_error(
                f"The upstream {self.member.base_url} did not answer within "
                f"{self.first_chunk:.3g}s.",
                timeout=True,
            ) from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise upstream_error(
                f"The upstream {self.member.base_url} sent an unreadable answer: {describe(exc)}"
            ) from exc
        if not isinstance(value, dict):
            raise upstream_error(f"The upstream {self.member.base_url} sent {type(value).__name__}")
        return value

    async def json(self) -> AsyncIterator[dict[str, Any]]:
        """Each event as JSON. A server that ignored `stream: true` and answered with one
        JSON body yields that body as its only event."""
        if self.response.headers.get("content-type", "").startswith("application/json"):
            yield await self.read_json()
            self.finished = True
            return
        async for payload in self.data():
            try:
                value = json.loads(payload)
            except ValueError as exc:
                raise upstream_error(
                    f"The upstream {self.member.base_url} sent a malformed event: {payload[:200]}"
                ) from exc
            if isinstance(value, dict):
                yield value

    async def _next(self, chunks: AsyncIterator[bytes], limit: float) -> bytes | None:
        """The next chunk; None at the end of the stream or when cancelled."""
        if self.cancel.is_set():
            return None
        try:
            async with asyncio.timeout(limit) as deadline:
                self._deadline = deadline
                return await anext(chunks)
        except StopAsyncIteration:
            return None
        except TimeoutError as exc:
            if self.cancel.is_set():
                return None
            raise upstream_error(
                f"The upstream {self.member.base_url} sent nothing for {limit:.3g}s; "
                "the request was abandoned.",
                timeout=True,
            ) from exc
        except httpx.HTTPError as exc:
            if self.cancel.is_set():
                return None
            raise upstream_error(
                f"The upstream {self.member.base_url} broke off the stream: {describe(exc)}"
            ) from exc
        finally:
            self._deadline = None

    async def _watch_cancel(self) -> None:
        """threading.Event has no awaitable form: poll it, then expire the pending read."""
        while not self.cancel.is_set():
            await asyncio.sleep(0.05)
        if self._deadline is not None:
            self._deadline.reschedule(asyncio.get_running_loop().time())
