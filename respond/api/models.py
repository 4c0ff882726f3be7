"""GET /v1/models (OpenAI shape, plus llama-server's `models` list), GET /health, and
llama-server's POST /models/load and /models/unload for the models of --models-dir.

The embedding model is listed after the chat models, as OpenAI lists its embedding models,
marked `meta.type: "embedding"` so that a client choosing a chat model can leave it out.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from respond._banner import WEB_SEARCH_OFF
from respond._config import WebSearchSettings
from respond.api._common import tenant_of
from respond.engines._base import Engine, OnDemand, not_ready
from respond.files import Embedder
from respond.protocol.errors import APIError, error_body
from respond.responses.run import Responses
from respond.store.base import Store, StoreFullError, StoreUnavailableError

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    tenant_of(request)
    service: Responses = request.app.state.responses
    created = request.app.state.started_at
    data = []
    models = []
    search = _web_search(request.app.state.web_search)
    for engine in service.engines.values():
        info = engine.info
        data.append(
            {
                "id": info.id,
                "object": "model",
                "created": created,
                "owned_by": info.owned_by,
                "meta": {
                    "n_ctx": info.context_window,
                    "backend": info.backend,
                    "vision": info.vision,  # it reads images
                    **({"upstreams": list(info.upstreams)} if info.upstreams else {}),
                    **({"chat_format": info.chat_format} if info.chat_format else {}),
                    **({"placement": dict(info.placement)} if info.placement else {}),
                    **({"state": info.state} if info.state else {}),
                    "web_search": search,
                },
            }
        )
        # llama-server's list: "multimodal" for a model with a projector.
        capabilities = [
            "completion",
            *(["multimodal"] if info.vision else []),
            *(["web_search"] if search["run"] else []),
        ]
        models.append(
            {"name": info.id, "model": info.id, "type": "model", "capabilities": capabilities}
        )
    embedder: Embedder | None = request.app.state.embedder
    if embedder is not None:
        data.append(_embedding_entry(embedder, created))
        models.append(
            {
                "name": embedder.model,
                "model": embedder.model,
                "type": "model",
                "capabilities": ["embedding"],
            }
        )
    return {"object": "list", "data": data, "models": models}


def _web_search(settings: WebSearchSettings | None) -> dict[str, Any]:
    """Whether requests' web_search tools are run, and by which provider; or why not."""
    if settings is None:
        return {"run": False, "why": WEB_SEARCH_OFF}
    return {"run": True, "provider": settings.provider}


def _embedding_entry(embedder: Embedder, created: int) -> dict[str, Any]:
    return {
        "id": embedder.model,
        "object": "model",
        "created": created,
        "owned_by": "respond",
        "meta": {"type": "embedding", "dimensions": embedder.dimensions},
    }


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    service: Responses = request.app.state.responses
    for engine in service.engines.values():
        if not engine.ready:
            failed = engine.load_error is not None
            error = not_ready(engine)
            body = error_body(error.message, type="server_error", code=error.code)
            return JSONResponse(
                {"status": "error" if failed else "loading", **body}, status_code=error.status
            )
    store: Store | None = request.app.state.store
    if store is not None and store.full:  # nothing can be saved until space returns
        full = error_body(str(StoreFullError()), type="server_error", code="storage_full")
        return JSONResponse({"status": "error", "store": "full", **full}, status_code=503)
    if store is not None and store.unreachable:  # until a transaction gets through again
        cause = "its database does not answer"
        down = error_body(
            str(StoreUnavailableError(cause)), type="server_error", code="store_unavailable"
        )
        return JSONResponse({"status": "error", "store": "unavailable", **down}, status_code=503)
    return await _upstream_health(service)


async def _upstream_health(service: Responses) -> JSONResponse:
    """Ok while every model has at least one reachable backend; details per upstream, and
    the slots of engines that have them (busy, and requests waiting for one)."""
    names = list(service.engines)
    reports = await asyncio.gather(*(service.engines[name].health() for name in names))
    details = {name: report for name, report in zip(names, reports, strict=True) if report}
    models: dict[str, dict[str, Any]] = {name: {"upstreams": r} for name, r in details.items()}
    for name, engine in service.engines.items():
        load = engine.load_report()
        if load is not None and load.slots is not None:
            slots = {"slots": load.slots, "busy_slots": load.busy_slots, "queued": load.queued}
            models.setdefault(name, {}).update(slots)
        if engine.info.placement:
            models.setdefault(name, {})["layers"] = engine.info.placement["layers"]
    if not models:
        return JSONResponse({"status": "ok"})
    down = [name for name, report in details.items() if not any(u["ok"] for u in report)]
    body: dict[str, Any] = {"status": "error" if down else "ok", "models": models}
    if down:
        body.update(
            error_body(
                f"No reachable upstream for: {', '.join(down)}.",
                type="server_error",
                code="upstream_unavailable",
            )
        )
    return JSONResponse(body, status_code=503 if down else 200)


@router.post("/models/load")
async def load_model(request: Request) -> dict[str, Any]:
    """Load a model of --models-dir now, as a first request would (waits for the load)."""
    engine = await _on_demand(request)
    await engine.load_now()
    return {"success": True, "model": engine.info.id, "state": engine.state}


@router.post("/models/unload")
async def unload_model(request: Request) -> dict[str, Any]:
    """Unload a model of --models-dir now; 409 while a request uses it."""
    engine = await _on_demand(request)
    if not await engine.unload("asked to"):
        raise APIError(
            409, f"The model '{engine.info.id}' is answering a request; unload it later."
        )
    return {"success": True, "model": engine.info.id, "state": engine.state}


async def _on_demand(request: Request) -> OnDemand:
    tenant_of(request)
    try:
        body = await request.json()
    except ValueError:
        body = None
    name = body.get("model") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name:
        raise APIError(400, 'Send {"model": NAME}, a model of --models-dir.', param="model")
    service: Responses = request.app.state.responses
    engine: Engine | None = service.engines.get(name)
    if engine is None:
        raise APIError(404, f"The model '{name}' does not exist.", param="model")
    if not isinstance(engine, OnDemand):
        raise APIError(
            400,
            f"The model '{name}' is always loaded (only --models-dir models load on demand).",
            param="model",
        )
    return engine
