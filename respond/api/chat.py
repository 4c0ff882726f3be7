"""POST /v1/chat/completions: the same run as /v1/responses, in Chat Completions' wire.

A thin door: the body is translated into a Responses request (api/_chat_wire.py), prepared
and run by the one `Responses` service, and the run's events (or its final response) are
translated back. Defaults, validation, reasoning and disconnects behave as they do there.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from respond.api._chat_wire import chunks, completion, to_request
from respond.api._common import JSONRoute, counted, run_to_end, streaming, tenant_of
from respond.api._docs import ERRORS, SSE
from respond.protocol.chat import ChatBody
from respond.protocol.errors import APIError
from respond.responses.run import Responses

__all__ = ["router"]

router = APIRouter(route_class=JSONRoute, tags=["chat"])


@router.post(
    "/v1/chat/completions",
    responses={200: {"content": SSE, "description": "A chat.completion, or chunks"}, **ERRORS},
)
async def chat_completions(request: Request, body: ChatBody) -> Response:
    """Chat Completions through the same run (JSON, or SSE chunks with `stream: true`)."""
    tenant = tenant_of(request)
    service: Responses = request.app.state.responses
    chat = to_request(body)
    try:
        run = await service.prepare(chat.body, tenant=tenant)
    except APIError as exc:
        raise chat.renamed(exc) from None
    request.state.model = run.resource.model  # for the access log and /metrics
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        events = counted(request, service.events(run))
        return streaming(request, chunks(run, events, include_usage=include_usage))
    return JSONResponse(completion(await run_to_end(request, service, run)))
