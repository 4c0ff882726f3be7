"""The app's lifespan: what runs from start-up to shutdown around the parts it is handed."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from respond._parts import Parts
from respond.store.housekeeping import purge_forever

__all__ = ["lifespan"]

log = logging.getLogger("respond")

LOADING_REPORT_SECONDS = 10.0


def lifespan(parts: Parts) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Open the store and start its upkeep, load the engines in the background (/health
    answers 503 until they are ready); at shutdown, drain the runs, then close in order."""

    @asynccontextmanager
    async def serving(app: FastAPI) -> AsyncIterator[None]:
        upkeep = await _open(parts)
        loaders = [
            asyncio.to_thread(engine.load) for engine in parts.engines.values() if not engine.ready
        ]
        tasks = [asyncio.ensure_future(loader) for loader in loaders]
        watcher = asyncio.ensure_future(_after_loading(tasks, parts.on_ready))
        yield
        watcher.cancel()  # it may still wait for a socket that never opened
        for task in tasks:
            await task
        for chore in upkeep:
            chore.cancel()
        await _close(parts)

    return serving


async def _open(parts: Parts) -> list[asyncio.Future[None]]:
    """Open the store and start its upkeep: the chores that run until shutdown."""
    store, runs = parts.store, parts.runs
    if store is None or runs is None:
        return []
    await store.open()
    await store.heartbeat(runs.runner)
    await runs.recover()  # before serving: nothing stays stuck after a crash
    upkeep: list[asyncio.Future[None]] = [
        asyncio.ensure_future(purge_forever(store)),
        asyncio.ensure_future(runs.maintain()),
    ]
    if parts.files is not None:  # files left in_progress by a stopped process too
        upkeep.append(asyncio.ensure_future(parts.files.indexer.run_forever()))
    if parts.containers is not None:
        upkeep.append(asyncio.ensure_future(parts.containers.sweep_forever()))
    return upkeep


async def _close(parts: Parts) -> None:
    """Drain the runs, then close the engines and the store."""
    if parts.runs is not None:  # before the engines close: a draining run may still finish
        await parts.runs.shutdown(drain_seconds=parts.drain.remaining())
    for engine in parts.engines.values():
        await engine.aclose()
    await parts.drain.settled()  # requests cut at shutdown record themselves first
    if parts.store is not None:
        await parts.store.close()


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
