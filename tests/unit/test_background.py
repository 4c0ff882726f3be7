"""Background runs against a real SQLite store, driven by the FAKE ScriptedEngine (a model
can't be made to generate slowly and predictably on demand)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from respond.engines import _base as d
from respond.protocol.requests import CreateResponseBody
from respond.responses.background import Runs
from respond.responses.history import History
from respond.responses.run import Responses
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    db = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=60)
    await db.open()
    yield db
    await db.close()


def runs_over(store: SQLiteStore, engine: ScriptedEngine) -> Runs:
    history = History(store)
    service = Responses({engine.info.id: engine}, recorder=history, history=history)
    return Runs(service, store)


async def final_status(store: SQLiteStore, response_id: str) -> str:
    for _ in range(200):
        stored = await store.get_response(None, response_id)
        assert stored is not None
        if stored.response["status"] not in ("queued", "in_progress"):
            return str(stored.response["status"])
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not end")


async def test_a_stored_cancel_request_stops_a_run_that_missed_the_signal(
    store: SQLiteStore,
) -> None:
    engine = ScriptedEngine(delay=0.02)
    engine.enqueue(*(d.TextDelta("word ") for _ in range(500)), d.Finish("stop"))
    runs = runs_over(store, engine)
    service = runs.service
    run = await service.prepare(CreateResponseBody(input="go", background=True))
    queued = await runs.start(run)
    assert queued.status == "queued"
    for _ in range(100):  # generating
        stored = await store.get_response(None, queued.id)
        if stored is not None and stored.response["output"]:
            break
        await asyncio.sleep(0.02)
    # As another replica does when its NOTIFY is lost: only the stored request.
    await store.request_cancel(None, queued.id)
    assert await final_status(store, queued.id) == "cancelled"
    assert run.turn.cancel.is_set()  # the engine was told to stop
    events = await store.events_after(None, queued.id, -1) or []
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["status"] == "cancelled"
    words = events[-1]["response"]["output"][0]["content"][0]["text"].count("word")
    assert words < 500


async def test_a_cancel_request_of_another_tenant_is_ignored(store: SQLiteStore) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("hi"), d.Finish("stop"))
    runs = runs_over(store, engine)
    run = await runs.service.prepare(CreateResponseBody(input="go", background=True), tenant="a")
    queued = await runs.start(run)
    await store.request_cancel("b", queued.id)
    for _ in range(200):
        stored = await store.get_response("a", queued.id)
        assert stored is not None
        if stored.response["status"] not in ("queued", "in_progress"):
            break
        await asyncio.sleep(0.02)
    assert stored.response["status"] == "completed"
