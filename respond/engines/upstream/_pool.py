"""HTTP to upstream servers: a pool of base URLs, failover, health, first-byte timeouts.

Both upstream engines (Chat Completions and Responses) open their streams through an
UpstreamPool, so balancing, affinity, health and error mapping are written once:

- a request goes to the healthy member with the fewest requests in flight; turns that
  share an affinity key (prompt_cache_key, a previous_response_id chain) prefer the
  member that served the key before, for its prefix cache;
- a failure to connect (nothing was sent to a model yet) marks the member down and the
  request moves on to the next member; a down member is probed until it answers again;
- timeouts: connect, first byte (headers and the first chunk), idle between chunks.
  Every failure becomes an EngineError: 504 for a timeout, 502 for anything else
  (_errors.py). The open stream is read by _sse.UpstreamStream.

The HTTP transport is injectable (`transport=httpx.MockTransport(...)` in tests), so failover
runs in-process with scripted members.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from respond._config import Timeouts
from respond.engines._base import EngineError, LoadReport, ModelInfo, UpstreamLoad
from respond.engines.upstream._errors import (
    UpstreamHTTPError,
    describe,
    http_error,
    refusal,
    upstream_error,
)
from respond.engines.upstream._sse import UpstreamStream

# The errors and the stream are re-exported: the translators take all they need from here.
__all__ = [
    "UpstreamHTTPError",
    "UpstreamPool",
    "UpstreamStream",
    "describe",
    "refusal",
    "upstream_error",
]

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


class UpstreamPool:
    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("an upstream pool needs at least one base URL")
        self.members = [Member(url.rstrip("/")) for url in base_urls]
        self.api_key = api_key
        self.timeouts = timeouts or Timeouts()
        self._affinity: OrderedDict[str, Member] = OrderedDict()
        self._turns = itertools.count()
        self._transport = transport  # None: httpx's own (real sockets)
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
                transport=self._transport,
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
                    raise await http_error(member.base_url, response, self.timeouts.idle)
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
