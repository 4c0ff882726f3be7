"""The access middleware: a request id on every answer, one log line and metrics per request."""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from respond.metrics import Metrics

__all__ = ["REQUEST_ID_HEADER", "AccessLog"]

log = logging.getLogger("respond.access")

REQUEST_ID_HEADER = "x-request-id"
# A caller's own id is kept when it is short and plain (it ends up in logs and headers).
_CALLER_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class AccessLog:
    """Per HTTP request: an x-request-id header, one access line, the request metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 0

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self._record(scope, request_id, status, time.perf_counter() - started)

    def _record(self, scope: Scope, request_id: str, status: int, seconds: float) -> None:
        state: dict[str, Any] = scope.get("state", {})
        route = _route(scope)
        model = state.get("model") or ""
        # No status sent means the app raised past every handler: the server answers 500.
        self.metrics.observe_request(route, model, status or 500, seconds)
        tokens = state.get("tokens")
        used = f" tokens={tokens[0]}+{tokens[1]}" if tokens else ""
        fields = {
            "request_id": request_id,
            "method": scope["method"],
            "path": scope["path"],
            "route": route,
            "status": status or 500,
            "duration_ms": round(seconds * 1000, 1),
            "model": model or None,
            "tenant": state.get("tenant"),
            "input_tokens": tokens[0] if tokens else None,
            "output_tokens": tokens[1] if tokens else None,
        }
        log.info(
            "%s %s %s %.0fms%s id=%s",
            scope["method"],
            scope["path"],
            status or 500,
            seconds * 1000,
            used,
            request_id,
            extra={"access": fields},
        )


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            text: str = value.decode("latin-1")
            if _CALLER_ID.fullmatch(text):
                return text
    return f"req_{uuid.uuid4().hex}"


def _route(scope: Scope) -> str:
    """The matched route's template (`/v1/responses/{response_id}`), never the raw path:
    paths are unbounded, and each label value is a time series."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
