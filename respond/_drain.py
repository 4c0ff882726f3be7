"""Stopping without losing work: on SIGTERM the server drains before it exits.

A rolling restart sends SIGTERM to one replica at a time. Draining, that replica
- answers /health 503 `draining` at once, so a load balancer or Kubernetes stops sending to it;
- refuses new requests with 503 and `Retry-After` (nothing of them has started, so a proxy may
  send them to another replica: docs/deploy.md's nginx block does); a new WebSocket connection
  is closed at once with code 1012 (service restart) and the reason, since a long-lived socket
  opened now would be cut by the end of the drain;
- lets the requests in flight (streams included) finish, for up to `--drain-timeout` seconds;
- gives its background runs what is left of that time (responses/background.py hands back
  or fails those that do not finish), then exits 0.

Ctrl-C (SIGINT) and a second SIGTERM stop at once, as uvicorn does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from respond.protocol.errors import error_body

__all__ = ["Drain", "DrainGate", "DrainingServer"]

log = logging.getLogger("respond")

RETRY_AFTER_SECONDS = 1  # another replica can take the request at once
SERVICE_RESTART = 1012  # the WebSocket close code for a server restarting (RFC 6455 registry)
SETTLE_SECONDS = 5.0


class Drain:
    """Whether the server is draining, since when, and how many requests are in flight."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.in_flight = 0
        self._started: float | None = None
        self._listeners: list[Callable[[], None]] = []

    @property
    def draining(self) -> bool:
        return self._started is not None

    def on_begin(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def begin(self) -> None:
        if self._started is None:
            self._started = time.monotonic()
            for listener in self._listeners:
                listener()

    def remaining(self) -> float:
        """Seconds of the drain left (0 when not draining: a stop is immediate)."""
        if self._started is None:
            return 0.0
        return max(0.0, self.timeout - (time.monotonic() - self._started))

    def done(self) -> bool:
        return self.draining and (self.in_flight == 0 or self.remaining() == 0)

    async def settled(self, timeout: float = SETTLE_SECONDS) -> None:
        """Wait (a bounded time) for the requests cut at the end of a drain to unwind:
        each stores what it had made as it goes, so the store must still be open."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


class DrainGate:
    """ASGI middleware: counts HTTP requests in flight; while draining, refuses new ones, and
    new WebSocket connections (those open already are left to end with the server)."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.drain.draining:
            await self._refuse_socket(receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            await self._refuse(scope, send)
            return
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1

    async def _refuse(self, scope: Scope, send: Send) -> None:
        message = "The server is shutting down; retry the request (another replica may serve it)."
        path: str = scope.get("path", "")
        if path == "/health":
            body: dict[str, object] = {"status": "draining"}
        elif path.startswith("/v1/messages"):
            body = {"type": "error", "error": {"type": "overloaded_error", "message": message}}
        else:
            body = error_body(message, type="server_error", code="server_shutting_down")
        data = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
            (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _refuse_socket(self, receive: Receive, send: Send) -> None:
        """Accepted, then closed at once with code 1012 and the reason: a client reads why
        (a handshake refused with a bare status says nothing; uvicorn logs an HTTP answer to
        a handshake as an error of the app)."""
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        reason = "The server is shutting down; connect again (another replica may serve it)."
        await send({"type": "websocket.close", "code": SERVICE_RESTART, "reason": reason})


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining on the first SIGTERM instead of stopping."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        # Past the drain, requests still running are cut (uvicorn would otherwise wait on).
        config.timeout_graceful_shutdown = 1
        super().__init__(config)
        self.drain = drain

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self.drain.draining:
            # Not uvicorn's way: it would re-raise SIGTERM after shutting down, and the
            # process would end killed by it instead of exiting 0.
            log.info(
                "SIGTERM: draining (up to %.0fs): new requests get 503, %d in flight finish",
                self.drain.timeout,
                self.drain.in_flight,
            )
            self.drain.begin()
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.drain.done():
            left = self.drain.in_flight
            if left:
                log.warning("drain timeout: %d requests still in flight are cut", left)
            self.should_exit = True
        return await super().on_tick(counter)
