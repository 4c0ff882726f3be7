"""Serve an app built in the test process (e.g. over a fake engine) with real uvicorn HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from respond import Server
from tests.support.server import free_port


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Yield the base URL (http://127.0.0.1:PORT) while uvicorn serves `app` in a thread."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="on"
    )
    with _running(uvicorn.Server(config)) as url:
        yield url


@contextmanager
def serving_server(server: Server) -> Iterator[str]:
    """`build_server(settings)`'s server, run as `respond serve` runs it, on a free port."""
    with _running(server.uvicorn_server(port=free_port(), log_level="warning")) as url:
        yield url


@contextmanager
def _running(server: uvicorn.Server) -> Iterator[str]:
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://{server.config.host}:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
