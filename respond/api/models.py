"""GET /v1/models (OpenAI shape, plus llama-server's `models` list) and GET /health."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from respond.api._common import tenant_of
from respond.protocol.errors import error_body
from respond.responses.run import Responses

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    tenant_of(request)
    service: Responses = request.app.state.responses
    created = request.app.state.started_at
    data = []
    models = []
    for engine in service.engines.values():
        info = engine.info
        data.append(
            {
                "id": info.id,
                "object": "model",
                "created": created,
                "owned_by": info.owned_by,
                "meta": {"n_ctx": info.context_window, "backend": info.backend},
            }
        )
        models.append(
            {"name": info.id, "model": info.id, "type": "model", "capabilities": ["completion"]}
        )
    return {"object": "list", "data": data, "models": models}


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    service: Responses = request.app.state.responses
    for engine in service.engines.values():
        if not engine.ready:
            failed = getattr(engine, "load_error", None)
            message = failed or f"Model '{engine.info.id}' is loading."
            body = error_body(
                message,
                type="server_error",
                code="model_unavailable" if failed else "model_loading",
            )
            return JSONResponse(
                {"status": "error" if failed else "loading", **body}, status_code=503
            )
    return JSONResponse({"status": "ok"})
