"""POST /v1/responses: parse, authorize, run, answer as JSON or as an SSE stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from respond.api._common import (
    SSE_HEADERS,
    counted,
    parse_body,
    run_to_end,
    sse_frame,
    sse_frames,
    tenant_of,
)
from respond.api._state import item_page, not_found, store_of
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.protocol.state import CompactBody, deleted
from respond.responses.background import Runs
from respond.responses.compaction import compact
from respond.responses.replay import follow
from respond.responses.run import PreparedRun, Responses

router = APIRouter()


@router.post("/v1/responses")
async def create_response(request: Request) -> Response:
    tenant = tenant_of(request)
    body = await parse_body(request, CreateResponseBody, max_bytes=request.app.state.max_body_bytes)
    service: Responses = request.app.state.responses
    run = await service.prepare(body, tenant=tenant)
    if body.background:
        return await _background(request, run)
    if body.stream:
        return StreamingResponse(
            sse_frames(counted(request, service.events(run))),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    response = await run_to_end(request, service, run)
    return JSONResponse(response.model_dump(mode="json"))


async def _background(request: Request, run: PreparedRun) -> Response:
    """Start a background run; answer it queued, or follow its stored events live."""
    runs: Runs | None = request.app.state.runs
    if runs is None:
        raise APIError(400, "Background responses need a store.", param="background")
    response = await runs.start(run)
    if not run.body.stream:
        return JSONResponse(response.model_dump(mode="json"))
    events = follow(runs.store, run.tenant, response.id, -1, [], runs)
    return StreamingResponse(
        _json_frames(events), media_type="text/event-stream", headers=SSE_HEADERS
    )


# ---------------------------------------------------------------- stored responses


@router.post("/v1/responses/input_tokens")
async def count_input_tokens(request: Request) -> JSONResponse:
    tenant = tenant_of(request)
    body = await parse_body(request, CreateResponseBody, max_bytes=request.app.state.max_body_bytes)
    service: Responses = request.app.state.responses
    tokens = await service.count_input_tokens(body, tenant)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": tokens})


@router.post("/v1/responses/compact")
async def compact_response(request: Request) -> JSONResponse:
    tenant = tenant_of(request)
    body = await parse_body(request, CompactBody, max_bytes=request.app.state.max_body_bytes)
    return JSONResponse(await compact(request.app.state.responses, body, tenant))


@router.get("/v1/responses/{response_id}")
async def retrieve_response(request: Request, response_id: str) -> Response:
    tenant = tenant_of(request)
    store = store_of(request, "response", response_id)
    params = request.query_params
    if params.get("stream", "false").lower() == "true":
        after = _starting_after(params.get("starting_after"))
        replay = await store.events_after(tenant, response_id, after)
        if replay is None:
            raise not_found("response", response_id)
        return StreamingResponse(
            _json_frames(follow(store, tenant, response_id, after, replay, request.app.state.runs)),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    stored = await store.get_response(tenant, response_id)
    if stored is None:
        raise not_found("response", response_id)
    return JSONResponse(stored.response)


def _starting_after(raw: str | None) -> int:
    if raw is None:
        return -1
    try:
        return int(raw)
    except ValueError:
        raise APIError(
            400,
            f"Invalid 'starting_after': {raw!r}; expected an integer sequence number.",
            param="starting_after",
            code="invalid_value",
        ) from None


async def _json_frames(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for event in events:
        yield sse_frame(event, event["type"])


@router.delete("/v1/responses/{response_id}")
async def delete_response(request: Request, response_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, "response", response_id)
    if not await store.delete_response(tenant, response_id):
        raise not_found("response", response_id)
    return JSONResponse(deleted(response_id, "response"))


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(request: Request, response_id: str) -> JSONResponse:
    store = store_of(request, "response", response_id)
    return JSONResponse(await item_page(request, store, "input", response_id, "response"))


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    runs: Runs | None = request.app.state.runs
    if runs is None:
        raise not_found("response", response_id)
    return JSONResponse(await runs.cancel(tenant, response_id))
