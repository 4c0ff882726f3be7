"""Background runs against a real SQLite store, driven by the FAKE ScriptedEngine (a model
can't be made to generate slowly and predictably on demand)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.requests import CreateResponseBody
from respond.protocol.resource import ResponseResource
from respond.responses import background
from respond.responses.background import Runs
from respond.responses.fold import fold_events
from respond.responses.history import History
from respond.responses.run import Responses
from respond.responses.sealing import Sealer
from respond.store.base import JSON, StoreUnavailableError
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine
from tests.support.schema import validate_event, validate_response

EVENTS: TypeAdapter[list[ev.Event]] = TypeAdapter(list[ev.Event])


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    db = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=60)
    await db.open()
    yield db
    await db.close()


# One key for every process of a test, as replicas that share a store share --secret-key.
SHARED_KEY = Sealer.ephemeral()


def runs_over(store: SQLiteStore, engine: ScriptedEngine, sealer: Sealer = SHARED_KEY) -> Runs:
    history = History(store, sealer)
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


async def test_a_stored_cancel_request_stops_a_run_whose_engine_is_quiet(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No signal and no event to flush: the upkeep loop finds the request in the store."""
    monkeypatch.setattr(background, "HEARTBEAT_SECONDS", 0.05)
    engine = ScriptedEngine(delay=600)  # in progress, its first word ten minutes away
    engine.enqueue(d.TextDelta("word"), d.Finish("stop"))
    runs = runs_over(store, engine)
    run = await runs.service.prepare(CreateResponseBody(input="go", background=True))
    queued = await runs.start(run)
    upkeep = asyncio.ensure_future(runs.maintain())
    try:
        for _ in range(100):
            stored = await store.get_response(None, queued.id)
            if stored is not None and stored.response["status"] == "in_progress":
                break
            await asyncio.sleep(0.02)
        await store.request_cancel(None, queued.id)
        assert await final_status(store, queued.id) == "cancelled"
    finally:
        upkeep.cancel()
        await asyncio.gather(upkeep, return_exceptions=True)


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
    assert stored is not None and stored.response["status"] == "completed"


# ---------------------------------------------------------------- one ending for every run


def stream_of(events: list[dict[str, Any]]) -> ResponseResource:
    """The stored events folded, after checking them against the spec and the stream grammar."""
    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] in ev.TERMINAL_TYPES for e in events].count(True) == 1
    assert events[-1]["type"] in ev.TERMINAL_TYPES
    return fold_events(EVENTS.validate_python(events))


async def assert_stored_stream_is_the_response(store: SQLiteStore, response_id: str) -> JSON:
    stored = await store.get_response(None, response_id)
    assert stored is not None
    validate_response(stored.response)
    events = await store.events_after(None, response_id, -1) or []
    assert stream_of(events).model_dump(mode="json") == stored.response
    assert events[-1]["response"] == stored.response
    return stored.response


async def test_an_orphaned_run_ends_through_fail_with_its_open_item_done(
    store: SQLiteStore,
) -> None:
    # What a process that died mid-run leaves: a stream cut after some text, its runner gone.
    resource = await Responses({"m": ScriptedEngine(name="m")}).prepare(
        CreateResponseBody(input="go", background=True)
    )
    builder = resource.builder
    cut = [*builder.start(), *builder.begin(), *builder.push(d.TextDelta("half a sen"))]
    dumped = [event.model_dump(mode="json") for event in cut]
    await store.save_response(
        None, builder.response.model_dump(mode="json"), [], dumped, runner="runner_dead"
    )
    runs = runs_over(store, ScriptedEngine())
    assert await runs.recover() == 1
    failed = await assert_stored_stream_is_the_response(store, builder.response.id)
    assert failed["status"] == "failed" and failed["error"]["code"] == "run_interrupted"
    message = failed["output"][0]
    assert message["status"] == "incomplete"
    assert message["content"][0]["text"] == "half a sen"
    events = await store.events_after(None, builder.response.id, len(cut) - 1)
    assert events is not None
    types = [e["type"] for e in events]
    assert types == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    assert await runs.recover() == 0  # ended once


async def test_cancelled_and_failed_runs_store_the_stream_they_sent(store: SQLiteStore) -> None:
    engine = ScriptedEngine(delay=0.01)
    engine.enqueue(*(d.TextDelta("word ") for _ in range(500)), d.Finish("stop"))
    engine.enqueue(d.ReasoningDelta("hmm"), d.TextDelta("so"), d.EngineError("crashed"))
    runs = runs_over(store, engine)
    cancelled = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    for _ in range(200):  # generating
        stored = await store.get_response(None, cancelled.id)
        if stored is not None and stored.response["output"]:
            break
        await asyncio.sleep(0.02)
    await runs.cancel(None, cancelled.id)
    response = await assert_stored_stream_is_the_response(store, cancelled.id)
    assert response["status"] == "cancelled"
    failed = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    assert await final_status(store, failed.id) == "failed"
    response = await assert_stored_stream_is_the_response(store, failed.id)
    assert [item["status"] for item in response["output"]] == ["completed", "incomplete"]
    assert response["error"] == {"code": "server_error", "message": "crashed"}


class CheckedStore(SQLiteStore):
    """The real SQLite store, checking that each response stored with events is exactly
    what all of its events so far describe (what a poller and a stream resume both see)."""

    appended = 0

    async def append_events(
        self, tenant: str | None, response_id: str, events: list[JSON], response: JSON
    ) -> bool:
        cancelled = await super().append_events(tenant, response_id, events, response)
        stored = await self.events_after(tenant, response_id, -1) or []
        assert fold_events(EVENTS.validate_python(stored)).model_dump(mode="json") == response
        self.appended += 1
        return cancelled


async def test_what_a_background_run_stores_agrees_with_its_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background, "FLUSH_SECONDS", 0.0)  # store after every event
    db = CheckedStore(tmp_path / "s.sqlite3", ttl_seconds=60)
    await db.open()
    engine = ScriptedEngine()
    # Each change of item makes several events from one delta (done, added, part added...).
    engine.enqueue(
        d.ReasoningDelta("think"),
        d.TextDelta("say"),
        d.ToolCallStart(call_id="call_1", name="f"),
        d.ToolCallArgumentsDelta("{}"),
        d.ToolCallEnd(),
        d.TextDelta("done"),
        d.Finish("stop"),
    )
    runs = runs_over(db, engine)
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    assert await final_status(db, queued.id) == "completed"
    assert db.appended > 5
    await assert_stored_stream_is_the_response(db, queued.id)
    await db.close()


class SilentStore(SQLiteStore):
    """The real SQLite store whose signals cannot be sent, as PostgreSQL's NOTIFY fails when
    the connection is cut between BEGIN and the statement (a restarting database)."""

    async def publish(self, kind: str, response_id: str) -> None:
        raise StoreUnavailableError(OSError("connection reset"))


async def test_a_run_whose_signals_fail_still_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal is a shortcut (followers poll): one the store cannot send must not end the
    run. It used to end it `cancelled`, its worker raising mid-run (CI, test_faults)."""
    monkeypatch.setattr(background, "FLUSH_SECONDS", 0.0)  # a signal after every event
    db = SilentStore(tmp_path / "s.sqlite3", ttl_seconds=60)
    await db.open()
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("one"), d.TextDelta(" two"), d.Finish("stop"))
    runs = runs_over(db, engine)
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    assert await final_status(db, queued.id) == "completed"
    stored = await db.get_response(None, queued.id)
    assert stored is not None
    assert stored.response["output"][0]["content"][0]["text"] == "one two"
    await db.close()


async def test_a_queued_run_claimed_by_a_dead_process_is_started_from_its_request(
    store: SQLiteStore,
) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("from the queue"), d.Finish("stop"))
    accepting = Runs(runs_over(store, engine).service, store, background_max=0)
    queued = await accepting.start(
        await accepting.service.prepare(CreateResponseBody(input="go", background=True))
    )
    # Another process claimed it, then died before starting it.
    assert [r["id"] for _, r, _ in await store.claim("runner_dead", 5)] == [queued.id]
    runs = runs_over(store, engine)
    assert await runs.claim() == 0  # claimed: not anyone's to take
    assert await runs.recover() == 0  # back in the queue, not failed
    assert await runs.claim() == 1
    assert await final_status(store, queued.id) == "completed"
    done = await assert_stored_stream_is_the_response(store, queued.id)
    assert done["created_at"] == queued.created_at
    assert done["output"][0]["content"][0]["text"] == "from the queue"
    types = [e["type"] for e in await store.events_after(None, queued.id, -1) or []]
    assert types.count("response.created") == types.count("response.in_progress") == 1


async def test_a_process_that_lost_its_claim_does_not_start_the_run(store: SQLiteStore) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("once"), d.Finish("stop"))
    accepting = Runs(runs_over(store, engine).service, store, background_max=0)
    queued = await accepting.start(
        await accepting.service.prepare(CreateResponseBody(input="go", background=True))
    )
    runs = runs_over(store, engine)
    assert await runs.claim() == 1
    # Before its worker starts the run, the claim passes to another process (as when this
    # one stalled past its lease): the store holds the lock, so this comes first.
    await store.release(runs.runner, queued.id)
    assert await store.claim_one("runner_other", None, queued.id)
    await asyncio.gather(*runs.tasks.values())
    stored = await store.get_response(None, queued.id)
    assert stored is not None and stored.response["status"] == "queued"
    assert len(await store.events_after(None, queued.id, -1) or []) == 2  # created, queued
    # The other process dies too: the run is queued again and runs here, once.
    assert await runs.recover() == 0
    assert await runs.claim() == 1
    assert await final_status(store, queued.id) == "completed"
    await assert_stored_stream_is_the_response(store, queued.id)
    types = [e["type"] for e in await store.events_after(None, queued.id, -1) or []]
    assert types.count("response.in_progress") == 1


async def test_a_queued_request_is_sealed_and_opens_only_with_the_key(store: SQLiteStore) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("never said"), d.Finish("stop"))
    accepting = Runs(runs_over(store, engine).service, store, background_max=0)
    # Whatever the body holds (MCP credentials too) is kept sealed, never in the clear.
    body = CreateResponseBody(input="the password is xyzzy-42", background=True)
    queued = await accepting.start(await accepting.service.prepare(body))
    async with store.transaction("test") as tx:
        (raw,) = await tx.fetch("SELECT request FROM responses WHERE id = ?", queued.id)
    assert "xyzzy-42" not in raw[0] and "sealed" in raw[0]
    # A replica with another key cannot open it: the run fails saying why, never hangs.
    stranger = runs_over(store, engine, Sealer.ephemeral())
    assert await stranger.claim() == 1
    assert await final_status(store, queued.id) == "failed"
    stored = await store.get_response(None, queued.id)
    assert stored is not None and "--secret-key" in stored.response["error"]["message"]


# ---------------------------------------------------------------- stopping (SIGTERM drain)


async def _started(store: SQLiteStore, response_id: str, *, with_output: bool) -> None:
    for _ in range(200):
        stored = await store.get_response(None, response_id)
        assert stored is not None
        if stored.response["status"] == "in_progress" and bool(stored.response["output"]) == (
            with_output
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not get there")


async def test_a_run_that_finishes_within_the_drain_ends_normally(store: SQLiteStore) -> None:
    engine = ScriptedEngine(delay=0.02)
    engine.enqueue(*(d.TextDelta("word ") for _ in range(10)), d.Finish("stop"))
    runs = runs_over(store, engine)
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    await _started(store, queued.id, with_output=True)
    await runs.shutdown(drain_seconds=10)
    assert (await assert_stored_stream_is_the_response(store, queued.id))["status"] == "completed"


async def test_a_run_past_the_drain_with_output_fails_and_keeps_it(store: SQLiteStore) -> None:
    engine = ScriptedEngine(delay=0.02)
    engine.enqueue(*(d.TextDelta("word ") for _ in range(500)), d.Finish("stop"))
    runs = runs_over(store, engine)
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    await _started(store, queued.id, with_output=True)
    await runs.shutdown(drain_seconds=0.2)
    final = await assert_stored_stream_is_the_response(store, queued.id)
    assert final["status"] == "failed"
    assert final["error"]["code"] == background.STOPPED
    assert "word" in final["output"][0]["content"][0]["text"]


async def test_a_run_past_the_drain_without_output_goes_back_to_the_queue(
    store: SQLiteStore,
) -> None:
    engine = ScriptedEngine(delay=5)  # its first delta would come after the drain
    engine.enqueue(d.TextDelta("late"), d.Finish("stop"))
    runs = runs_over(store, engine)
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    await _started(store, queued.id, with_output=False)
    await runs.shutdown(drain_seconds=0.2)
    stored = await store.get_response(None, queued.id)
    assert stored is not None and stored.response["status"] == "queued"
    events = await store.events_after(None, queued.id, -1) or []
    assert [e["type"] for e in events] == ["response.created", "response.queued"]
    # Another process (or the next start) runs it from its stored request, to the end.
    engine2 = ScriptedEngine()
    engine2.enqueue(d.TextDelta("done"), d.Finish("stop"))
    other = runs_over(store, engine2)
    assert await other.claim() == 1
    assert await final_status(store, queued.id) == "completed"
    final = await assert_stored_stream_is_the_response(store, queued.id)
    assert final["output"][0]["content"][0]["text"] == "done"


async def test_a_draining_process_claims_no_queued_run(store: SQLiteStore) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("hi"), d.Finish("stop"))
    runs = runs_over(store, engine)
    runs.background_max = 0  # accepted, left queued
    queued = await runs.start(
        await runs.service.prepare(CreateResponseBody(input="go", background=True))
    )
    runs.background_max = 1
    runs.stop_claiming()
    assert await runs.claim() == 0
    stored = await store.get_response(None, queued.id)
    assert stored is not None and stored.response["status"] == "queued"


# ---------------------------------------------------------------- cancelled before it ran


async def _claimed_here(store: SQLiteStore, engine: ScriptedEngine) -> tuple[Runs, str]:
    """A queued run that `runs` has just claimed: its worker task exists, not yet stepped."""
    accepting = Runs(runs_over(store, engine).service, store, background_max=0)
    queued = await accepting.start(
        await accepting.service.prepare(CreateResponseBody(input="go", background=True))
    )
    runs = runs_over(store, engine)
    assert await runs.claim() == 1
    return runs, queued.id


async def test_a_run_cancelled_before_its_worker_ran_ends_cancelled(store: SQLiteStore) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("never"), d.Finish("stop"))
    runs, response_id = await _claimed_here(store, engine)
    # As `cancel` does when it reads the run between the claim and the worker's first step:
    # asyncio then runs none of the worker, so its ending cannot be the worker's own.
    task = runs.tasks[response_id]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await final_status(store, response_id) == "cancelled"
    await assert_stored_stream_is_the_response(store, response_id)
    assert not runs.tasks


async def test_a_run_stopped_before_its_worker_ran_goes_back_to_the_queue(
    store: SQLiteStore,
) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("from the next process"), d.Finish("stop"))
    runs, response_id = await _claimed_here(store, engine)
    await runs.shutdown(drain_seconds=0)  # before the worker's first step
    stored = await store.get_response(None, response_id)
    assert stored is not None and stored.response["status"] == "queued"
    other = runs_over(store, engine)
    assert await other.claim() == 1  # released, not held by the stopped process
    assert await final_status(store, response_id) == "completed"
