"""HTTP to upstream servers: a pool of base URLs, failover, timeouts, SSE reading.

Both upstream engines (Chat Completions and Responses) open their streams through an
UpstreamPool, so balancing, affinity, health and error mapping are written once:

- a request goes to the healthy member with the fewest requests in flight; turns that
  share an affinity key (prompt_cache_key, a previous_response_id chain) prefer the
  member that served the key before, for its prefix cache;
- a failure to connect (nothing was sent to a model yet) marks the member down and the
  request moves on to the next member; a down member is probed until it answers again;
- timeouts: connect, first byte (headers and the first chunk), idle between chunks.
  Every failure becomes an EngineError: 504 for a timeout, 502 for anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from respond._config import Timeouts
from respond.engines._base import EngineError, LoadReport, ModelInfo, UpstreamLoad

__all__ = ["UpstreamHTTPError", "UpstreamPool", "UpstreamStream", "upstream_error"]

log = logging.getLogger("respond.upstream")

_AFFINITY_LIMIT = 10_000  # remembered keys; the oldest are forgotten first


@dataclass
class Member:
    base_url: str
    in_flight: int = 0
    healthy: bool = True
    last_error: str | None = None
    checked_at: float = 0.0
    failures: int = 0  # requests to it that failed, for /metrics
    failovers: int = 0  # requests that moved on from it to the next member
    probe: asyncio.Task[None] | None = field(default=None, repr=False)


class UpstreamHTTPError(EngineError):
    """The upstream answered with an HTTP error status before streaming anything.

    What the client caused (see `refusal`) keeps a 4xx; anything else is a 502.
    """

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        status: int = 502,
        code: str = "upstream_error",
        param: str | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, param=param)
        self.upstream_status = upstream_status
        # How long the prompt was, when a context_length_exceeded refusal says so.
        self.prompt_tokens = prompt_tokens


def upstream_error(message: str, *, timeout: bool = False) -> EngineError:
    if timeout:
        return EngineError(message, code="upstream_timeout", status=504)
    return EngineError(message, code="upstream_error", status=502)


class UpstreamPool:
    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("an upstream pool needs at least one base URL")
        self.members = [Member(url.rstrip("/")) for url in base_urls]
        self.api_key = api_key
        self.timeouts = timeouts or Timeouts()
        self._affinity: OrderedDict[str, Member] = OrderedDict()
        self._turns = itertools.count()
        self._client: httpx.AsyncClient | None = None
        self._checking: asyncio.Future[list[bool]] | None = None

    def model_info(self, alias: str, *, backend: str, vision: bool) -> ModelInfo:
        """How a model served from this pool is listed."""
        return ModelInfo(
            id=alias,
            owned_by="upstream",
            # No tokenizer here: the upstream itself reports a prompt that is too long.
            context_window=None,
            backend=backend,
            vision=vision,
            upstreams=tuple(member.base_url for member in self.members),
        )

    def load_report(self) -> LoadReport:
        return LoadReport(
            upstreams=tuple(
                UpstreamLoad(m.base_url, m.in_flight, m.healthy, m.failures, m.failovers)
                for m in self.members
            )
        )

    # ------------------------------------------------------------ client

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                headers=headers,
                # Read timeouts are enforced per chunk by UpstreamStream (first byte vs idle).
                timeout=httpx.Timeout(self.timeouts.connect, read=None, write=None, pool=None),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
            )
        return self._client

    async def aclose(self) -> None:
        for member in self.members:
            if member.probe is not None:
                member.probe.cancel()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # ------------------------------------------------------------ choosing

    def _order(self, affinity: Sequence[str]) -> list[Member]:
        """Members to try, best first: the affine one, then least in flight, then the down."""
        turn = next(self._turns)
        size = len(self.members)
        # Rotate before sorting so ties are broken round-robin, not always by the first.
        rotated = [self.members[(turn + i) % size] for i in range(size)]
        ordered = sorted(rotated, key=lambda m: (not m.healthy, m.in_flight))
        for key in affinity:
            preferred = self._affinity.get(key)
            if preferred is not None and preferred.healthy:
                ordered.remove(preferred)
                ordered.insert(0, preferred)
                break
        return ordered

    def remember(self, keys: Sequence[str], member: Member) -> None:
        for key in keys:
            self._affinity[key] = member
            self._affinity.move_to_end(key)
        while len(self._affinity) > _AFFINITY_LIMIT:
            self._affinity.popitem(last=False)

    # ------------------------------------------------------------ health

    def mark_down(self, member: Member, reason: str) -> None:
        member.last_error = reason
        if member.healthy:
            log.warning("upstream %s is down: %s", member.base_url, reason)
        member.healthy = False
        if member.probe is None or member.probe.done():
            member.probe = asyncio.get_running_loop().create_task(self._probe_until_up(member))

    def _mark_up(self, member: Member) -> None:
        if not member.healthy:
            log.info("upstream %s is back", member.base_url)
        member.healthy = True
        member.last_error = None

    async def _probe_until_up(self, member: Member) -> None:
        while not member.healthy:
            await asyncio.sleep(self.timeouts.probe_interval)
            await self.check(member)

    async def check(self, member: Member) -> bool:
        """GET /models on one member; updates its health either way."""
        member.checked_at = time.time()
        try:
            reply = await self.client.get(
                f"{member.base_url}/models", timeout=self.timeouts.connect
            )
        except httpx.HTTPError as exc:
            member.last_error = describe(exc)
            member.healthy = False
            return False
        if reply.status_code >= 500:
            member.last_error = f"GET /models answered {reply.status_code}"
            member.healthy = False
            return False
        self._mark_up(member)
        return True

    async def health(self) -> list[dict[str, Any]]:
        """Check every member (concurrently); one report per member.

        Models sharing this pool ask at once on each /health: they share one check.
        """
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(
                asyncio.gather(*(self.check(member) for member in self.members))
            )
        await asyncio.shield(self._checking)
        return [
            {
                "url": member.base_url,
                "ok": member.healthy,
                "in_flight": member.in_flight,
                **({"error": member.last_error} if member.last_error else {}),
            }
            for member in self.members
        ]

    # ------------------------------------------------------------ streaming

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        affinity: Sequence[str] = (),
        cancel: threading.Event | None = None,
        at_root: bool = False,
    ) -> AsyncIterator[UpstreamStream]:
        """POST body to the best member and yield its open stream (status < 400).

        `path` is under the base URL, or with `at_root` under the server's root (the base
        URL without its /v1), where llama-server and vLLM keep /tokenize.
        Connection failures move on to the next member; HTTP errors and timeouts raise
        EngineError at once (the upstream received the request, so it is not retried).
        """
        failures: list[str] = []
        order = self._order(affinity)
        for position, member in enumerate(order):
            base = member.base_url.removesuffix("/v1") if at_root else member.base_url
            request = self.client.build_request("POST", base + path, json=body)
            member.in_flight += 1
            sent = time.monotonic()
            try:
                response = await self._send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                member.in_flight -= 1
                member.failures += 1
                if position + 1 < len(order):
                    member.failovers += 1  # the request moves on to the next member
                self.mark_down(member, describe(exc))
                failures.append(f"{member.base_url}: {describe(exc)}")
                continue
            except EngineError:  # no headers in time, or a transport error
                member.in_flight -= 1
                member.failures += 1
                raise
            except BaseException:
                member.in_flight -= 1
                raise
            try:
                self._mark_up(member)
                if response.status_code >= 400:
                    if response.status_code >= 500:
                        member.failures += 1
                    raise await _http_error(member, response, self.timeouts.idle)
                self.remember(affinity, member)
                # first_byte covers the headers and the first chunk together.
                waited = time.monotonic() - sent
                first = max(0.001, self.timeouts.first_byte - waited)
                try:
                    yield UpstreamStream(response, member, self.timeouts, cancel, first_chunk=first)
                except EngineError:  # timed out, broke off, or sent nonsense mid-stream
                    member.failures += 1
                    raise
            finally:
                member.in_flight -= 1
                await response.aclose()
            return
        raise upstream_error("No upstream could be reached: " + "; ".join(failures))

    async def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            async with asyncio.timeout(self.timeouts.first_byte):
                try:
                    return await self.client.send(request, stream=True)
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    # A kept-alive connection the server had closed (llama-cpp-python closes
                    # one after a broken stream): nothing was answered, so send it once more.
                    return await self.client.send(request, stream=True)
        except TimeoutError as exc:
            raise upstream_error(
                f"The upstream {request.url} sent no response headers within "
                f"{self.timeouts.first_byte:g}s.",
                timeout=True,
            ) from exc
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise
        except httpx.HTTPError as exc:
            raise upstream_error(
                f"Upstream request to {request.url} failed: {describe(exc)}"
            ) from exc


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
        buffer = b""
        pending: list[str] = []
        while True:
            chunk = await self._next(chunks, limit)
            limit = self.timeouts.idle
            if chunk is None:
                if pending and not self.cancel.is_set():
                    yield "\n".join(pending)
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
                if line.startswith("data:"):
                    pending.append(line[5:].removeprefix(" "))
                elif not line and pending:
                    yield "\n".join(pending)
                    pending = []

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


async def _http_error(member: Member, response: httpx.Response, limit: float) -> EngineError:
    try:
        async with asyncio.timeout(limit):
            raw = await response.aread()
    except (TimeoutError, httpx.HTTPError):
        raw = b"(the error body could not be read)"
    message = raw.decode("utf-8", errors="replace").strip()
    kind = ""  # the error's own code and type, which name some refusals better than words
    prompt: int | None = None
    try:
        error = json.loads(raw).get("error")
        if isinstance(error, dict):
            message = str(error.get("message") or message)
            kind = f"{error.get('code') or ''} {error.get('type') or ''}"
            if isinstance(error.get("n_prompt_tokens"), int):  # llama-server says it
                prompt = int(error["n_prompt_tokens"])
        elif isinstance(error, str):
            message = error
    except (ValueError, AttributeError):
        pass
    status = response.status_code
    text = f"The upstream {member.base_url} answered {status}: {message[:2000]}"
    if prompt is None and (said := _PROMPT.search(message)):  # llama-cpp-python, vLLM
        prompt = int(said[1] or said[2])
    return UpstreamHTTPError(
        text, upstream_status=status, prompt_tokens=prompt, **refusal(status, message, kind)
    )


_CONTEXT = re.compile(r"context.(length|size|window)|maximum context|too many tokens", re.I)
_PROMPT = re.compile(r"(\d+) (?:tokens )?in the messages|has (\d+) input tokens", re.I)
_IMAGE = re.compile(r"image.*not supported|not support.*image|mmproj|multimodal", re.I)


def refusal(status: int, message: str, kind: str = "") -> dict[str, Any]:
    """The client's error for an upstream's refusal: what the request caused stays a 4xx.

    A prompt too long for the upstream's context is 400 context_length_exceeded; an image
    sent to a text-only upstream is 400 unsupported_content (llama-server says so with a
    500); other 400/413/422 are the request's fault too, and 429 is passed on. 401, 403 and
    404 are respond's configuration (its key, its model name), so they stay 502.
    """
    if _CONTEXT.search(message) or "context" in kind:
        return {"status": 400, "code": "context_length_exceeded", "param": "input"}
    if _IMAGE.search(message):
        return {"status": 400, "code": "unsupported_content", "param": "input"}
    if status in (400, 413, 422):
        return {"status": 400, "code": "invalid_request_error"}
    if status == 429:
        return {"status": 429, "code": "rate_limit_exceeded"}
    return {}


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
