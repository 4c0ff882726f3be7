"""The application factory: the app handed its parts, as starlette's apps are handed their
routes, middleware, exception handlers and lifespan. `assemble` (respond/_parts.py) builds
the parts; `build_server` (respond/_server.py) the services they run on."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.middleware import Middleware

from respond._access import AccessLog
from respond._drain import DrainGate
from respond._lifespan import lifespan
from respond._parts import Parts
from respond._version import __version__
from respond.api import (
    chat,
    containers,
    conversations,
    embeddings,
    files,
    messages,
    metrics,
    models,
    responses,
    vector_stores,
    web,
    websocket,
)
from respond.api._errors import EXCEPTION_HANDLERS

__all__ = ["create_app"]

ROUTERS = [
    *(responses.router, websocket.router, conversations.router, chat.router, messages.router),
    *(models.router, files.router, vector_stores.router, containers.router),
    *(embeddings.router, metrics.router, web.router),
]


def create_app(parts: Parts) -> FastAPI:
    """The ASGI app over `parts`: `create_app(assemble(engines))` is a bare one."""
    # The docs pages' scripts are served by respond itself (fastapi-offline): no CDN.
    app = FastAPIOffline(
        title="respond",
        version=__version__,
        summary="The OpenAI Responses API (Open Responses) for local and self-hosted models.",
        docs_url="/docs",
        redoc_url="/redoc",
        lifespan=lifespan(parts),
        exception_handlers=EXCEPTION_HANDLERS,
        # The access log outermost: the drain's refusals are logged too.
        middleware=[
            Middleware(AccessLog, metrics=parts.metrics),
            Middleware(DrainGate, drain=parts.drain),
        ],
    )
    for name, value in parts.state().items():  # the routes read request.app.state.<name>
        setattr(app.state, name, value)
    for router in ROUTERS:
        app.include_router(router)
    return app
