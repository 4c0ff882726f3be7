"""POST /v1/responses: parse, authorize, run, answer as JSON or as an SSE stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive

from respond.api._common import parse_body, sse_frames, tenant_of
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.protocol.resource import ResponseResource
from respond.responses.run import PreparedRun, Responses

router = APIRouter()

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.post("/v1/responses")
async def create_response(request: Request) -> Response:
    tenant = tenant_of(request)
    body = await parse_body(request, CreateResponseBody, max_bytes=request.app.state.max_body_bytes)
    service: Responses = request.app.state.responses
    run = await service.prepare(body, tenant=tenant)
    if body.stream:
        return StreamingResponse(
            sse_frames(_counted(request, service.events(run))),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    response = await _complete(request, service, run)
    if response.status == "failed" and response.error is not None:
        raise APIError(run.failure_status, response.error.message, code=response.error.code)
    return JSONResponse(response.model_dump(mode="json"))


async def _counted(request: Request, events: AsyncIterator[ev.Event]) -> AsyncIterator[ev.Event]:
    """Pass events through, noting the final usage for the access log."""
    async for event in events:
        if isinstance(event, ev.ResponseCompleted | ev.ResponseIncomplete | ev.ResponseFailed):
            _note_usage(request, event.response)
        yield event


def _note_usage(request: Request, response: ResponseResource) -> None:
    if response.usage is not None:
        request.state.tokens = (response.usage.input_tokens, response.usage.output_tokens)


async def _complete(request: Request, service: Responses, run: PreparedRun) -> ResponseResource:
    """Run to the end; a client that hangs up stops generation (and the run ends cancelled)."""
    final: ResponseResource | None = None

    async def consume(scope: anyio.CancelScope) -> None:
        nonlocal final
        async for event in _counted(request, service.events(run)):
            if isinstance(event, ev.ResponseCompleted | ev.ResponseIncomplete | ev.ResponseFailed):
                final = event.response
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(consume, group.cancel_scope)
        group.start_soon(_cancel_on_disconnect, request.receive, group.cancel_scope)
    if final is None:
        raise APIError(499, "Client closed the request.", code="client_closed_request")
    return final


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
