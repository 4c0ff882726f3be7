"""POST /v1/responses: parse, authorize, run, answer as JSON or as an SSE stream."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from respond.api._common import (
    JSONRoute,
    counted,
    run_to_end,
    sse_frame,
    sse_frames,
    streaming,
    tenant_of,
)
from respond.api._docs import ERRORS, json_or_sse
from respond.api._state import ListParams, item_page, limits_of, not_found, store_of
from respond.protocol.errors import APIError
from respond.protocol.limits import check_id
from respond.protocol.requests import CreateResponseBody
from respond.protocol.resource import ResponseResource
from respond.protocol.state import (
    CompactBody,
    CompactResource,
    Deleted,
    InputTokens,
    ItemList,
    deleted,
)
from respond.responses.background import Runs
from respond.responses.compaction import compact
from respond.responses.replay import follow
from respond.responses.run import PreparedRun, Responses
from respond.store.base import Store, StoreFullError

router = APIRouter(route_class=JSONRoute, tags=["responses"])


@router.post("/v1/responses", responses={**json_or_sse(ResponseResource), **ERRORS})
async def create_response(request: Request, body: CreateResponseBody) -> Response:
    """Create a response: JSON, or Server-Sent Events with `stream: true`."""
    tenant = tenant_of(request)
    service: Responses = request.app.state.responses
    store: Store | None = request.app.state.store
    if store is not None and store.full and body.store is not False:
        raise StoreFullError()  # refused before generating what could not be kept
    run = await service.prepare(body, tenant=tenant)
    request.state.model = run.resource.model  # for the access log and /metrics
    if body.background:
        return await _background(request, run)
    if body.stream:
        return streaming(request, sse_frames(counted(request, service.events(run))))
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
    return streaming(request, _json_frames(events))


# ---------------------------------------------------------------- stored responses


@router.post("/v1/responses/input_tokens", response_model=InputTokens, responses=ERRORS)
async def count_input_tokens(request: Request, body: CreateResponseBody) -> JSONResponse:
    """How many input tokens the request would cost (history and template included)."""
    tenant = tenant_of(request)
    service: Responses = request.app.state.responses
    tokens = await service.count_input_tokens(body, tenant)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": tokens})


@router.post("/v1/responses/compact", response_model=CompactResource, responses=ERRORS)
async def compact_response(request: Request, body: CompactBody) -> JSONResponse:
    """The whole context of a turn, sealed into one `compaction` item."""
    tenant = tenant_of(request)
    return JSONResponse(await compact(request.app.state.responses, body, tenant))


@router.get("/v1/responses/{response_id}", responses={**json_or_sse(ResponseResource), **ERRORS})
async def retrieve_response(
    request: Request,
    response_id: str,
    stream: bool = False,
    starting_after: Annotated[int, Query(ge=-1, le=2**31 - 1)] = -1,
) -> Response:
    """A stored response; with `stream=true`, its events after `starting_after`, then live."""
    tenant = tenant_of(request)
    store = store_of(request, "response", response_id)
    if stream:
        after = starting_after
        replay = await store.events_after(tenant, response_id, after)
        if replay is None:
            raise not_found("response", response_id)
        events = follow(store, tenant, response_id, after, replay, request.app.state.runs)
        return streaming(request, _json_frames(events))
    stored = await store.get_response(tenant, response_id)
    if stored is None:
        raise not_found("response", response_id)
    return JSONResponse(stored.response)


async def _json_frames(events: AsyncIterator[dict[str, Any]]) -> AsyncGenerator[bytes, None]:
    async for event in events:
        yield sse_frame(event, event["type"])


@router.delete("/v1/responses/{response_id}", response_model=Deleted, responses=ERRORS)
async def delete_response(request: Request, response_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, "response", response_id)
    if not await store.delete_response(tenant, response_id):
        raise not_found("response", response_id)
    return JSONResponse(deleted(response_id, "response"))


@router.get("/v1/responses/{response_id}/input_items", response_model=ItemList, responses=ERRORS)
async def list_input_items(request: Request, response_id: str, query: ListParams) -> JSONResponse:
    store = store_of(request, "response", response_id)
    page = await item_page(request, store, "input", response_id, query, "response")
    return JSONResponse(page)


@router.post(
    "/v1/responses/{response_id}/cancel", response_model=ResponseResource, responses=ERRORS
)
async def cancel_response(request: Request, response_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    check_id(response_id, "response_id", limits_of(request), "response")
    runs: Runs | None = request.app.state.runs
    if runs is None:
        raise not_found("response", response_id)
    return JSONResponse(await runs.cancel(tenant, response_id))
