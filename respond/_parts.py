"""The app's parts: `assemble(engines, settings, services)` builds what `create_app` is handed.

`build_server` (respond/_server.py) makes the `Services` from the settings and the config file:
the store, the API keys, the sealing key, the embedding model, the sandbox, the MCP and web
search setup. `assemble` builds what runs on them: the metrics, the history, the file and
container services, the hosted families and the `Responses` service they serve, the background
runs and the drain. Every setting is read from one `Settings`, so a bare app is

    create_app(assemble(engines))  # no store, no keys, `respond serve`'s defaults
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields

from respond._config import DEFAULTS, McpSettings, Settings, WebSearchSettings
from respond._drain import Drain
from respond._ids import new_id
from respond.api._common import KeyRing
from respond.containers import ContainerService, Sandbox
from respond.engines._base import Engine
from respond.files import Embedder, ExtractLimits, FileService, make_file_service
from respond.metrics import Metrics
from respond.responses.background import STALE_SECONDS, Runs
from respond.responses.history import History
from respond.responses.hosted import WebSearch, families
from respond.responses.images import ImagePolicy, ImageSources
from respond.responses.run import ResponseRecorder, Responses
from respond.responses.sealing import Sealer
from respond.store.base import Store

__all__ = ["Parts", "Services", "assemble"]


@dataclass(frozen=True)
class Services:
    """What `build_server` makes from the settings and the config file. Each left out is off,
    so `Services()` is a bare app's."""

    store: Store | None = None  # None: nothing is kept (no stored responses, runs or files)
    keys: KeyRing = field(default_factory=KeyRing)  # none: every request is let in
    sealer: Sealer | None = None  # None: a key of this process only (responses/sealing.py)
    embedder: Embedder | None = None  # None: files are searched lexically, no /v1/embeddings
    sandbox: Sandbox | None = None  # runs the code_interpreter tool and the hosted shell
    mcp: McpSettings | None = None  # None: McpSettings() (no configured servers)
    web_search: WebSearchSettings | None = None  # its provider; None: the tool is not run
    recorder: ResponseRecorder | None = None  # tests: records responses instead of History


@dataclass
class Parts:
    """Everything the app is handed. The lifespan (respond/_lifespan.py) runs the engines and
    the services; the routes read the rest as `request.app.state.<name>`."""

    engines: Mapping[str, Engine]
    responses: Responses
    runs: Runs | None  # with a store
    drain: Drain
    store: Store | None
    history: History
    files: FileService | None  # with a SQL store
    containers: ContainerService | None  # with a SQL store and a sandbox
    metrics: Metrics
    keys: KeyRing
    web_search: WebSearchSettings | None  # /v1/models says whether it is run
    embedder: Embedder | None
    max_body_bytes: int
    metrics_auth: bool
    keepalive: float
    started_at: int = field(default_factory=lambda: int(time.time()))
    on_ready: Callable[[], Awaitable[None]] | None = None  # once every engine has loaded

    def state(self) -> dict[str, object]:
        """What the routes read: every part but those only the lifespan runs."""
        lifespan_only = {"engines", "on_ready"}  # routes reach engines through `responses`
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in lifespan_only}


def assemble(
    engines: Mapping[str, Engine],
    settings: Settings = DEFAULTS,
    services: Services = Services(),
    *,
    on_ready: Callable[[], Awaitable[None]] | None = None,
) -> Parts:
    """The parts of the app serving `engines` with `services`, as `settings` ask.
    `on_ready` is awaited once every engine has loaded (`respond serve`'s ready banner)."""
    store = services.store
    meters = Metrics(engines)
    if store is not None:
        store.observer = meters.observe_store
    history = History(store, services.sealer)
    runner = new_id("runner")  # this process, as the background runs and the indexer name it
    file_service = _files(store, services.embedder, settings, runner)
    containers = _containers(store, services.sandbox, settings.max_file_mb)
    search = None if services.web_search is None else WebSearch.of(services.web_search)
    responses = Responses(
        engines,
        recorder=services.recorder or history,
        history=history,
        n_predict=settings.n_predict,
        temperature=settings.temperature,
        limits=settings.limits,
        metrics=meters,
        hosted=families(services.mcp, file_service, containers, search),
        reasoning_events=settings.reasoning_events,
        images=ImageSources(
            file_service.files if file_service else None,
            ImagePolicy(
                allow=tuple(settings.image_allow), allow_private=settings.image_allow_private
            ),
        ),
    )
    runs = None
    drain = Drain(settings.drain_timeout)
    if store is not None:
        runs = Runs(responses, store, background_max=settings.background_max, runner=runner)
        drain.on_begin(runs.stop_claiming)  # queued runs are left to the other replicas
    return Parts(
        engines=engines,
        responses=responses,
        runs=runs,
        drain=drain,
        store=store,
        history=history,
        files=file_service,
        containers=containers,
        metrics=meters,
        keys=services.keys,
        web_search=services.web_search,
        embedder=services.embedder,
        max_body_bytes=settings.max_body_mb * 1024 * 1024,
        metrics_auth=settings.metrics_auth,
        keepalive=settings.keepalive,
        on_ready=on_ready,
    )


def _files(
    store: Store | None, embedder: Embedder | None, settings: Settings, runner: str
) -> FileService | None:
    """Files and vector stores: with a SQL store."""
    limits = ExtractLimits(
        timeout=settings.extract_timeout,
        max_pages=settings.extract_max_pages,
        max_chars=settings.extract_max_chars,
    )
    return make_file_service(
        store,
        runner=runner,
        stale_after=STALE_SECONDS,
        max_file_mb=settings.max_file_mb,
        embedder=embedder,
        extract_limits=limits,
    )


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
