"""POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages API, for Claude
Code and the Anthropic SDKs, from the same run as /v1/responses (see _messages_wire.py).

Errors on these routes use Anthropic's envelope and every answer carries a request-id
header; api/_errors.py answers errors raised under MESSAGES_PREFIX with `error_response`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from respond._ids import new_id
from respond.api._common import SSE_HEADERS, JSONRoute, counted, run_to_end, streaming, tenant_of
from respond.api._docs import json_or_sse
from respond.api._messages_wire import (
    MessageStream,
    error_type,
    message_of,
    request_body,
)
from respond.engines import ContextOverflowError, OverloadedError
from respond.protocol import events as ev
from respond.protocol import messages as m
from respond.protocol.errors import APIError
from respond.responses.run import PreparedRun, Responses

__all__ = ["MESSAGES_PREFIX", "error_response", "router"]

router = APIRouter(route_class=JSONRoute, tags=["messages"])

MESSAGES_PREFIX = "/v1/messages"
ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": m.MessagesError, "description": "The request is wrong (Anthropic's envelope)"},
    "5XX": {"model": m.MessagesError, "description": "The server or an upstream failed"},
}


# `?beta=true` (Claude Code sends it) and the anthropic-version / anthropic-beta headers
# are accepted and change nothing: respond serves one version of the API.


@router.post("/v1/messages", responses={**json_or_sse(m.Message), **ERRORS})
async def create_message(request: Request, body: m.MessagesBody) -> Response:
    """A Message (Anthropic's Messages API): JSON, or Server-Sent Events with `stream: true`."""
    headers = {"request-id": _request_id(request)}
    tenant = tenant_of(request, x_api_key=True)
    service: Responses = request.app.state.responses
    engine = service.engine_for(body.model)
    run = await service.prepare(
        request_body(body, engine=engine, sealer=service.sealer), tenant=tenant
    )
    if body.stream:
        frames = _frames(run, counted(request, service.events(run)))
        return streaming(request, frames, beat=PING, headers={**headers, **SSE_HEADERS})
    response = await run_to_end(request, service, run)
    if response.status == "failed" and response.error is not None:
        raise APIError(run.failure_status, response.error.message, code=response.error.code)
    return JSONResponse(message_of(response, run).model_dump(mode="json"), headers=headers)


@router.post("/v1/messages/count_tokens", response_model=m.TokenCount, responses=ERRORS)
async def count_tokens(request: Request, body: m.CountTokensBody) -> JSONResponse:
    """How many input tokens a Messages request would cost (template and tools included)."""
    headers = {"request-id": _request_id(request)}
    tenant = tenant_of(request, x_api_key=True)
    service: Responses = request.app.state.responses
    engine = service.engine_for(body.model)
    run_body = request_body(body, engine=engine, sealer=service.sealer)
    tokens = await service.count_input_tokens(run_body, tenant)
    return JSONResponse({"input_tokens": tokens}, headers=headers)


# Anthropic's keep-alive: a ping event (Claude Code gives up on a stream silent for 5 minutes).
PING = f"event: ping\ndata: {m.Ping().model_dump_json()}\n\n".encode()


async def _frames(
    run: PreparedRun, events: AsyncGenerator[ev.Event, None]
) -> AsyncGenerator[bytes, None]:
    stream = MessageStream(run)
    async with aclosing(events):
        async for event in events:
            for out in stream.translate(event):
                yield f"event: {out.type}\ndata: {out.model_dump_json()}\n\n".encode()


def _request_id(request: Request) -> str:
    """This request's id, made once: the success answer and any error share it."""
    rid: str | None = getattr(request.state, "request_id", None)
    if rid is None:
        rid = new_id("req")
        request.state.request_id = rid
    return rid


def error_response(
    request: Request,
    status: int,
    message: str,
    cause: object = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error in Anthropic's envelope, with the request-id header (and `headers`)."""
    if isinstance(cause, ContextOverflowError):
        # Claude Code looks for "prompt is too long" to compact its conversation.
        message = (
            f"prompt is too long: {cause.prompt_tokens} tokens > "
            f"{cause.context_window - 1} maximum (the model's context window is "
            f"{cause.context_window} tokens, and output needs room too)"
        )
    rid = _request_id(request)
    # A full queue is what Anthropic calls overloaded (its 529), answered as a 429.
    kind = "overloaded_error" if isinstance(cause, OverloadedError) else error_type(status)
    body = m.MessagesError(error=m.MessagesErrorDetail(type=kind, message=message), request_id=rid)
    return JSONResponse(
        body.model_dump(mode="json"),
        status_code=status,
        headers={**(headers or {}), "request-id": rid},
    )
