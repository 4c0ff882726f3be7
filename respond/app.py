"""The application factory: wires engines, routes, auth and error handling."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.middleware import Middleware

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
from respond.api._errors import EXCEPTION_HANDLERS
from respond.containers import ContainerService, Sandbox
from respond.engines._base import Engine
from respond.files import Embedder, ExtractLimits, FileService, make_file_service
from respond.metrics import Metrics
from respond.protocol.events import ReasoningEvents
from respond.protocol.limits import Limits
from respond.responses.background import STALE_SECONDS, Runs
from respond.responses.history import History
from respond.responses.hosted import WebSearch, families
from respond.responses.images import ImagePolicy, ImageSources
from respond.responses.run import ResponseRecorder, Responses
from respond.responses.sealing import Sealer
from respond.store.base import Store
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
        None
        if store is None
        else Runs(service, store, background_max=background_max, runner=runner)
    )
    drain = drain or Drain(DEFAULTS.drain_timeout)
    if runs is not None:
        drain.on_begin(runs.stop_claiming)  # queued runs are left to the other replicas
    # The docs pages' scripts are served by respond itself (fastapi-offline): no CDN.
    app = FastAPIOffline(
        title="respond",
        version=__version__,
        summary="The OpenAI Responses API (Open Responses) for local and self-hosted models.",
        docs_url="/docs",
        redoc_url="/redoc",
        lifespan=_lifespan(engines, store, runs, file_service, code, drain, on_ready),
        exception_handlers=EXCEPTION_HANDLERS,
        # The access log outermost: the drain's refusals are logged too.
        middleware=[Middleware(AccessLog, metrics=meters), Middleware(DrainGate, drain=drain)],
    )
    state = {
        "responses": service,
        "drain": drain,
        "runs": runs,
        "keys": keys or KeyRing(),
        "store": store,
        "history": history,
        "files": file_service,
        "containers": code,
        "embedder": embedder,
        "web_search": web_search,
        "max_body_bytes": max_body_mb * 1024 * 1024,
        "started_at": int(time.time()),
        "metrics": meters,
        "metrics_auth": metrics_auth,
        "keepalive": keepalive,
    }
    for name, value in state.items():
        setattr(app.state, name, value)
    for router in ROUTERS:
        app.include_router(router)
    return app


ROUTERS = [
    *(responses.router, websocket.router, conversations.router, chat.router, messages.router),
    *(models.router, files.router, vector_stores.router, containers.router),
    *(embeddings.router, metrics.router, web.router),
]


def _lifespan(
    engines: Mapping[str, Engine],
    store: Store | None,
    runs: Runs | None,
    file_service: FileService | None,
    code: ContainerService | None,
    drain: Drain,
    on_ready: Callable[[], Awaitable[None]] | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Open the store and start its upkeep, load the engines in the background (/health
    answers 503 until they are ready); at shutdown, drain the runs, then close in order."""

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

    return lifespan


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
