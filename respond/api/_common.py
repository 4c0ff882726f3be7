"""What every route shares: body parsing with OpenAI-style errors, auth, SSE framing, and
running a prepared run to its end for a client that waits for one JSON answer."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
)
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.types import Receive

from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, load_json
from respond.protocol.resource import ResponseResource
from respond.responses.run import PreparedRun, Responses
from respond.store.base import StoreFullError, StoreUnavailableError

__all__ = [
    "SSE_HEADERS",
    "JSONRoute",
    "KeyRing",
    "Upload",
    "counted",
    "read_upload",
    "run_to_end",
    "sse_frame",
    "sse_frames",
    "streaming",
    "tenant_of",
    "with_keepalives",
]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# Room for the multipart framing and the other fields around an upload's bytes.
FORM_OVERHEAD = 64 * 1024


class JSONRoute(APIRoute):
    """A route that authorizes first, and whose typed body FastAPI validates, read by
    respond's rules first.

    The body is read under the size limit (413) and parsed as JSON whatever the
    Content-Type says (curl -d sends form-urlencoded; llama-server accepts that too), so
    FastAPI's own parsing only ever sees a JSON object. Its validation errors become the
    OpenAI envelope with `param` in app.py.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        anthropic = self.path.startswith("/v1/messages")  # takes x-api-key as well
        reads_body = self.body_field is not None  # not e.g. POST .../cancel

        async def authorize_then_handle(request: Request) -> Response:
            # The key before anything of the request is read or validated: a caller without
            # one learns nothing of what the route expects (not even its field names).
            tenant_of(request, x_api_key=anthropic)
            if reads_body:
                await _read_json(request, max_bytes=request.app.state.max_body_bytes)
            return await handle(request)

        return authorize_then_handle


async def _read_json(request: Request, *, max_bytes: int) -> None:
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise APIError(
                413,
                f"Request body is larger than the {max_bytes // (1024 * 1024)} MiB limit.",
                code="request_too_large",
            )
    limits: Limits = request.app.state.responses.limits
    data = load_json(bytes(raw), limits, "request body")
    # Hand FastAPI the parsed body (Starlette caches both), declared as the JSON it is.
    request._body = bytes(raw)
    request._json = data
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
    request.scope["headers"] = [*headers, (b"content-type", b"application/json")]


@dataclass(frozen=True)
class KeyRing:
    """API keys, each belonging to a tenant (the name before ':' in a key file line)."""

    keys: tuple[tuple[str | None, str], ...] = ()

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> KeyRing:
        keys: list[tuple[str | None, str]] = []
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, key = line.partition(":")
            keys.append((name, key) if sep else (None, line))
        return cls(tuple(keys))

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def tenant(self, authorization: str | None, *, api_key: str | None = None) -> str | None:
        """The tenant for an Authorization header (or, where the API has one, an x-api-key
        header: `api_key`); raises 401 when a key is required and wrong."""
        if not self.enabled:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if api_key and not (scheme.lower() == "bearer" and token):
            scheme, token = "bearer", api_key
        if scheme.lower() != "bearer" or not token:
            how = "'x-api-key: <key>' or " if api_key is not None else ""
            raise APIError(
                401,
                f"Missing API key. Send {how}'Authorization: Bearer <key>' (see --api-key).",
                code="invalid_api_key",
            )
        found: str | None = None
        matched = False
        for name, key in self.keys:
            # Compare with every key, in constant time, so timing reveals nothing.
            if hmac.compare_digest(key.encode(), token.encode()):
                found, matched = name, True
        if not matched:
            raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")
        return found


def tenant_of(request: Request, *, x_api_key: bool = False) -> str | None:
    """The request's tenant. `x_api_key`: the route's API (Anthropic's) also takes the key
    in an x-api-key header."""
    ring: KeyRing = request.app.state.keys
    api_key = request.headers.get("x-api-key", "") if x_api_key else None
    tenant = ring.tenant(request.headers.get("authorization"), api_key=api_key)
    request.state.tenant = tenant  # for the access log
    return tenant


def sse_frame(event: ev.Event | dict[str, Any], name: str | None = None) -> bytes:
    if isinstance(event, BaseModel):
        return f"event: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    prefix = f"event: {name}\n" if name else ""
    return f"{prefix}data: {data}\n\n".encode()


async def sse_frames(events: AsyncIterator[ev.Event]) -> AsyncGenerator[bytes, None]:
    async for event in events:
        yield sse_frame(event)


# An SSE comment line: every SSE reader skips it, and every proxy and client sees bytes move.
KEEPALIVE = b": keep-alive\n\n"


async def with_keepalives(
    frames: AsyncGenerator[bytes, None], every: float, beat: bytes = KEEPALIVE
) -> AsyncGenerator[bytes, None]:
    """`frames`, with `beat` sent after each `every` seconds that pass without one (none when
    `every` is 0): a long prompt can take minutes to read before the first token, and clients
    (Codex, OpenCode, Claude Code) give up on a stream that stays silent for their idle
    timeout."""
    ahead: asyncio.Future[bytes] = asyncio.ensure_future(anext(frames))
    try:
        while True:
            done, _ = await asyncio.wait({ahead}, timeout=every or None)
            if not done:
                yield beat
                continue
            try:
                frame = ahead.result()
            except StopAsyncIteration:
                return
            yield frame
            ahead = asyncio.ensure_future(anext(frames))
    finally:
        # The client left (or the stream ended): stop the run where it waits, then close it,
        # which cancels generation. Shielded: this task is itself being cancelled, and the
        # run must be let finish its own ending (recording the response cancelled).
        ahead.cancel()
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await ahead
            await frames.aclose()


def streaming(
    request: Request,
    frames: AsyncGenerator[bytes, None],
    *,
    beat: bytes = KEEPALIVE,
    headers: Mapping[str, str] = SSE_HEADERS,
) -> StreamingResponse:
    """An SSE response of `frames`, kept alive at the server's --keepalive interval."""
    every: float = request.app.state.keepalive
    return StreamingResponse(
        with_keepalives(frames, every, beat), media_type="text/event-stream", headers=headers
    )


# ---------------------------------------------------------------- running


async def counted(
    request: Request, events: AsyncGenerator[ev.Event, None]
) -> AsyncGenerator[ev.Event, None]:
    """Pass a run's events through, noting the final usage for the access log. Closing
    this closes the run (which then stops generating)."""
    async with aclosing(events):
        async for event in events:
            if isinstance(event, ev.TERMINAL_EVENTS) and event.response.usage is not None:
                usage = event.response.usage
                request.state.tokens = (usage.input_tokens, usage.output_tokens)
            yield event


async def run_to_end(request: Request, service: Responses, run: PreparedRun) -> ResponseResource:
    """The run's final response, for a client waiting for one JSON answer.

    A failed run is raised as its APIError (nothing has been sent yet). A client that
    hangs up stops generation: the run ends cancelled, and this answers 499.
    """
    final: ResponseResource | None = None

    async def consume(scope: anyio.CancelScope) -> None:
        nonlocal final
        async for event in counted(request, service.events(run)):
            if isinstance(event, ev.TERMINAL_EVENTS):
                final = event.response
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(consume, group.cancel_scope)
        group.start_soon(_cancel_on_disconnect, request.receive, group.cancel_scope)
    if final is None:
        raise APIError(499, "Client closed the request.", code="client_closed_request")
    if final.status == "failed" and final.error is not None:
        raise APIError(
            run.failure_status, final.error.message, code=final.error.code, param=run.failure_param
        )
    if isinstance(run.unsaved, StoreFullError | StoreUnavailableError):
        raise run.unsaved  # made, but not kept: nothing to acknowledge
    if run.unsaved is not None:
        raise APIError(500, "The response was made but could not be stored.", code="server_error")
    return final


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


# ---------------------------------------------------------------- multipart uploads


@dataclass(frozen=True)
class Upload:
    """A multipart upload's one file (its name cut to a base name) and its text fields."""

    filename: str
    content: bytes
    fields: dict[str, str]


async def read_upload(request: Request, max_bytes: int, *, max_fields: int, missing: str) -> Upload:
    """The multipart body's `file`, at most `max_bytes` (else 413; the body is not parsed
    before it is known to fit), and its text fields; a 400 saying `missing` without a file.
    The form is closed before this returns: its spooled file goes now, not when the
    request is collected."""
    await _read_limited(request, max_bytes + FORM_OVERHEAD)
    try:
        form = await request.form(max_files=1, max_fields=max_fields)
    except MultiPartException as exc:
        raise APIError(400, f"Invalid multipart body: {exc.message}", param="file") from exc
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise APIError(400, missing, param="file", code="missing_required_parameter")
        content = await upload.read()
        fields = {key: value for key, value in form.multi_items() if isinstance(value, str)}
    finally:
        await form.close()
    if len(content) > max_bytes:
        raise _too_large(max_bytes)
    return Upload(_upload_name(upload.filename), content, fields)


async def _read_limited(request: Request, max_bytes: int) -> None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes - FORM_OVERHEAD)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise _too_large(max_bytes - FORM_OVERHEAD)
    request._body = bytes(raw)  # what request.form() parses (Starlette reads it from here)


def _too_large(max_bytes: int) -> APIError:
    return APIError(
        413,
        f"The file is larger than the {max_bytes // (1024 * 1024)} MiB limit (--max-file-mb).",
        param="file",
        code="file_too_large",
    )


def _upload_name(name: str | None) -> str:
    name = (name or "").rsplit("/", 1)[-1].strip()
    if not name:
        return "upload"
    if len(name) > 256 or not name.isprintable():
        raise APIError(400, "The file name is too long or has control characters.", param="file")
    return name
