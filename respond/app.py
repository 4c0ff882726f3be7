"""The application factory: wires engines, routes, auth and error handling."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from respond._access import AccessLog
from respond._config import DEFAULTS, McpSettings, WebSearchSettings
from respond._drain import Drain, DrainGate
from respond._ids import new_id
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
from respond.api._common import KeyRing
from respond.containers import ContainerService, Sandbox
from respond.engines._base import Engine
from respond.files import Embedder, ExtractLimits, make_file_service
from respond.metrics import Metrics
from respond.protocol.errors import APIError, error_body, from_error_list
from respond.protocol.events import ReasoningEvents
from respond.protocol.limits import Limits
from respond.responses.background import STALE_SECONDS, Runs
from respond.responses.history import History
from respond.responses.hosted import WebSearch, families
from respond.responses.images import ImagePolicy, ImageSources
from respond.responses.run import ResponseRecorder, Responses
from respond.responses.sealing import Sealer
from respond.store.base import Store, StoreFullError, StoreUnavailableError
from respond.store.housekeeping import purge_forever

__all__ = ["create_app"]

log = logging.getLogger("respond")

LOADING_REPORT_SECONDS = 10.0


def create_app(
    engines: Mapping[str, Engine],
    *,
    keys: KeyRing | None = None,
    recorder: ResponseRecorder | None = None,
    store: Store | None = None,
    max_body_mb: int = DEFAULTS.max_body_mb,
    sealer: Sealer | None = None,
    n_predict: int | None = DEFAULTS.n_predict,
    background_max: int = DEFAULTS.background_max,
    temperature: float = DEFAULTS.temperature,
    limits: Limits | None = None,
    metrics_auth: bool = DEFAULTS.metrics_auth,
    keepalive: float = DEFAULTS.keepalive,
    on_ready: Callable[[], Awaitable[None]] | None = None,
    mcp: McpSettings | None = None,
    reasoning_events: ReasoningEvents = DEFAULTS.reasoning_events,
    max_file_mb: int = DEFAULTS.max_file_mb,
    embedder: Embedder | None = None,
    extract_limits: ExtractLimits | None = None,
    drain: Drain | None = None,
    sandbox: Sandbox | None = None,
    images: ImagePolicy | None = None,
    web_search: WebSearchSettings | None = None,
) -> FastAPI:
    """The ASGI app. `on_ready` is awaited once every engine has loaded (the start-up banner).

    Each setting left out is `respond serve`'s default (the `Settings` field's); `limits`,
    `mcp` and `drain` default to theirs too (`build_server` passes every one of them).
    `sandbox` (--code-interpreter) runs the code_interpreter tool, `web_search` (its
    provider) the web_search tool; None: they are not run."""
    meters = Metrics(engines)
    if store is not None:
        store.observer = meters.observe_store
    history = History(store, sealer)
    runner = new_id("runner")  # this process, as the background runs and the indexer name it
    file_service = make_file_service(
        store,
        runner=runner,
        stale_after=STALE_SECONDS,
        max_file_mb=max_file_mb,
        embedder=embedder,
        extract_limits=extract_limits,
    )
    code = _containers(store, sandbox, max_file_mb)
    service = Responses(
        engines,
        recorder=recorder or history,
        history=history,
        n_predict=n_predict,
        temperature=temperature,
        limits=limits or DEFAULTS.limits,
        metrics=meters,
        hosted=families(
            mcp, file_service, code, None if web_search is None else WebSearch.of(web_search)
        ),
        reasoning_events=reasoning_events,
        images=ImageSources(file_service.files if file_service else None, images),
    )
    runs = (
        Runs(service, store, background_max=background_max, runner=runner)
        if store is not None
        else None
    )
    drain = drain or Drain(DEFAULTS.drain_timeout)
    if runs is not None:
        drain.on_begin(runs.stop_claiming)  # queued runs are left to the other replicas

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upkeep: list[asyncio.Future[None]] = []
        if store is not None and runs is not None:
            await store.open()
            await store.heartbeat(runs.runner)
            await runs.recover()  # before serving: nothing stays stuck after a crash
            upkeep = [
                asyncio.ensure_future(purge_forever(store)),
                asyncio.ensure_future(runs.maintain()),
            ]
            if file_service is not None:  # files left in_progress by a stopped process too
                upkeep.append(asyncio.ensure_future(file_service.indexer.run_forever()))
            if code is not None:
                upkeep.append(asyncio.ensure_future(code.sweep_forever()))
        loaders = [
            asyncio.to_thread(engine.load) for engine in engines.values() if not engine.ready
        ]
        # Load in the background: /health answers 503 until the model is ready.
        tasks = [asyncio.ensure_future(loader) for loader in loaders]
        watcher = asyncio.ensure_future(_after_loading(tasks, on_ready))
        yield
        watcher.cancel()  # it may still wait for a socket that never opened
        for task in tasks:
            await task
        for chore in upkeep:
            chore.cancel()
        if runs is not None:  # before the engines close: a draining run may still finish
            await runs.shutdown(drain_seconds=drain.remaining())
        for engine in engines.values():
            await engine.aclose()
        await drain.settled()  # requests cut at shutdown record themselves first
        if store is not None:
            await store.close()

    # The docs pages' scripts are served by respond itself (fastapi-offline): no CDN.
    app = FastAPIOffline(
        title="respond",
        version=__version__,
        summary="The OpenAI Responses API (Open Responses) for local and self-hosted models.",
        docs_url="/docs",
        redoc_url="/redoc",
        lifespan=lifespan,
    )
    app.state.responses = service
    app.state.drain = drain
    app.state.runs = runs
    app.state.keys = keys or KeyRing()
    app.state.store = store
    app.state.history = history
    app.state.files = file_service
    app.state.containers = code
    app.state.embedder = embedder
    app.state.web_search = web_search
    app.state.max_body_bytes = max_body_mb * 1024 * 1024
    app.state.started_at = int(time.time())
    app.state.metrics = meters
    app.state.metrics_auth = metrics_auth
    app.state.keepalive = keepalive
    app.include_router(responses.router)
    app.include_router(websocket.router)
    app.include_router(conversations.router)
    app.include_router(chat.router)
    app.include_router(messages.router)
    app.include_router(models.router)
    app.include_router(files.router)
    app.include_router(vector_stores.router)
    app.include_router(containers.router)
    app.include_router(embeddings.router)
    app.include_router(metrics.router)
    app.include_router(web.router)

    # The Messages API's routes answer errors in Anthropic's envelope; the rest in OpenAI's.
    def anthropic(request: Request) -> bool:
        return request.url.path.startswith(messages.MESSAGES_PREFIX)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        if anthropic(request):
            return messages.error_response(
                request, exc.status, exc.message, exc.__cause__, headers=exc.headers
            )
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StoreFullError)
    async def _store_full(request: Request, exc: StoreFullError) -> JSONResponse:
        log.error("refused %s %s: %s", request.method, request.url.path, exc)
        if anthropic(request):
            return messages.error_response(request, 507, str(exc))
        return JSONResponse(
            error_body(str(exc), type="server_error", code="storage_full"), status_code=507
        )

    @app.exception_handler(StoreUnavailableError)
    async def _store_unavailable(request: Request, exc: StoreUnavailableError) -> JSONResponse:
        log.warning("refused %s %s: %s", request.method, request.url.path, exc)
        retry = {"Retry-After": "1"}
        if anthropic(request):
            return messages.error_response(request, 503, str(exc), headers=retry)
        body = error_body(str(exc), type="server_error", code="store_unavailable")
        return JSONResponse(body, status_code=503, headers=retry)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        message = "Not found." if exc.status_code == 404 else str(exc.detail)
        if anthropic(request):
            return messages.error_response(request, exc.status_code, message)
        code = _HTTP_CODES.get(exc.status_code, kind)
        return JSONResponse(error_body(message, type=kind, code=code), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        body, status = _request_error(exc)
        if anthropic(request):
            return messages.error_response(request, status, body["error"]["message"])
        return JSONResponse(body, status_code=status)

    @app.exception_handler(Exception)
    async def _server_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not the client's fault: still the error envelope, and logged in full.
        log.error("unhandled error", exc_info=exc)
        message = "The server had an error processing the request."
        if anthropic(request):
            return messages.error_response(request, 500, message)
        body = error_body(message, type="server_error", code="server_error")
        return JSONResponse(body, status_code=500)

    app.add_middleware(DrainGate, drain=drain)
    app.add_middleware(AccessLog, metrics=meters)  # outermost: refusals are logged too
    return app


def _containers(
    store: Store | None, sandbox: Sandbox | None, max_file_mb: int
) -> ContainerService | None:
    """The containers of the code_interpreter tool: with a sandbox and a SQL store."""
    from respond.store.containers import ContainerStore
    from respond.store.files import FileStore
    from respond.store.sql import SQLStore

    if sandbox is None or not isinstance(store, SQLStore):
        return None
    return ContainerService(
        ContainerStore(store),
        FileStore(store),
        sandbox,
        sandbox.root.parent,
        max_file_bytes=max_file_mb * 1024 * 1024,
    )


# Every error has a code: routing errors too.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def _request_error(exc: RequestValidationError) -> tuple[dict[str, Any], int]:
    """A typed body's errors (located under "body") or a query parameter's, as one 400."""
    errors = exc.errors()
    where = errors[0]["loc"][0] if errors and errors[0]["loc"] else "body"
    if where == "body":
        located = [{**e, "loc": tuple(e["loc"])[1:]} for e in errors]
        error = from_error_list(located, exc.body if exc.body is not None else {})
    else:
        first = errors[0]
        param = ".".join(str(part) for part in first["loc"][1:]) or None
        error = APIError(
            400, f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value"
        )
    return error.body(), error.status


async def _after_loading(
    loading: Sequence[asyncio.Future[None]], on_ready: Callable[[], Awaitable[None]] | None
) -> None:
    """Say every few seconds that loading goes on; then call on_ready (the banner)."""
    started = time.monotonic()
    pending = set(loading)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=LOADING_REPORT_SECONDS)
        if pending:
            log.info("still loading the model (%.0fs)", time.monotonic() - started)
    if on_ready is not None:
        await on_ready()
