"""One suite, run against both stores: a real SQLite file and the local PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from respond.store import ListQuery, Store
from respond.store.base import UnknownCursorError
from respond.store.postgres import PostgresStore, split_schema
from respond.store.sql import SQLStore
from respond.store.sqlite import SQLiteStore
from tests.support.stores import drop_schema, new_schema_url


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        sqlite = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=100, clock=clock)
        await sqlite.open()
        yield sqlite
        await sqlite.close()
        return
    url, schema = new_schema_url()
    pg = PostgresStore(url, ttl_seconds=100, clock=clock)
    await pg.open()
    try:
        yield pg
    finally:
        await pg.close()
        await drop_schema(schema)


def message(item_id: str, text: str, role: str = "user") -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "type": "message",
        "id": item_id,
        "role": role,
        "status": "completed",
        "content": [{"type": kind, "text": text}],
    }


def response(
    rid: str, status: str = "completed", output: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1,
        "status": status,
        "output": output if output is not None else [message(f"msg_out_{rid}", "hi", "assistant")],
    }


def events(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"type": "x", "sequence_number": i} for i in range(start, start + n)]


async def test_response_round_trip(store: Store) -> None:
    inputs = [message("msg_a", "one"), message("msg_b", "two")]
    await store.save_response("t1", response("resp_1"), inputs, events(5))
    got = await store.get_response("t1", "resp_1")
    assert got is not None
    assert got.response == response("resp_1")
    assert got.input_items == inputs
    assert got.output_items == response("resp_1")["output"]
    assert [e["sequence_number"] for e in await store.events_after("t1", "resp_1", 2) or []] == [
        3,
        4,
    ]
    # Saving again replaces (the final record of a run that was saved when queued).
    await store.save_response("t1", response("resp_1", "failed"), inputs[:1], events(2))
    again = await store.get_response("t1", "resp_1")
    assert again is not None and again.response["status"] == "failed"
    assert again.input_items == inputs[:1]
    assert len(await store.events_after("t1", "resp_1", -1) or []) == 2


async def test_tenants_do_not_see_each_other(store: Store) -> None:
    await store.save_response("t1", response("resp_1"), [message("msg_a", "x")], events(1))
    assert await store.get_response("t2", "resp_1") is None
    assert await store.get_response(None, "resp_1") is None
    assert await store.events_after("t2", "resp_1", -1) is None
    assert await store.list_items("t2", "input", "resp_1", ListQuery()) is None
    assert await store.find_item("t2", "msg_a") is None
    assert await store.find_item("t1", "msg_a") == message("msg_a", "x")
    assert not await store.delete_response("t2", "resp_1")
    assert await store.get_response("t1", "resp_1") is not None


async def test_delete_really_deletes(store: Store) -> None:
    await store.save_response(None, response("resp_1"), [message("msg_a", "x")], events(3))
    assert await store.delete_response(None, "resp_1")
    assert await store.get_response(None, "resp_1") is None
    assert await store.find_item(None, "msg_a") is None
    assert await store.find_item(None, "msg_out_resp_1") is None
    assert await store.events_after(None, "resp_1", -1) is None
    assert not await store.delete_response(None, "resp_1")


async def test_input_items_pagination(store: Store) -> None:
    inputs = [message(f"msg_{i}", str(i)) for i in range(7)]
    await store.save_response(None, response("resp_1"), inputs, [])

    async def ids(**kw: Any) -> tuple[list[str], bool]:
        page = await store.list_items(None, "input", "resp_1", ListQuery(**kw))
        assert page is not None
        return [item["id"] for item in page.data], page.has_more

    assert await ids() == (["msg_6", "msg_5", "msg_4", "msg_3", "msg_2", "msg_1", "msg_0"], False)
    assert await ids(limit=3, order="asc") == (["msg_0", "msg_1", "msg_2"], True)
    assert await ids(limit=3, order="asc", after="msg_2") == (["msg_3", "msg_4", "msg_5"], True)
    assert await ids(limit=3, order="asc", after="msg_5") == (["msg_6"], False)
    assert await ids(limit=2, after="msg_4") == (["msg_3", "msg_2"], True)
    assert await ids(order="asc", before="msg_2") == (["msg_0", "msg_1"], False)
    assert await ids(before="msg_4") == (["msg_6", "msg_5"], False)
    assert await ids(order="asc", after="msg_1", before="msg_4") == (["msg_2", "msg_3"], False)
    page = await store.list_items(None, "input", "resp_1", ListQuery(limit=2))
    assert page is not None
    assert page.wire()["first_id"] == "msg_6" and page.wire()["last_id"] == "msg_5"
    with pytest.raises(UnknownCursorError) as bad:
        await store.list_items(None, "input", "resp_1", ListQuery(after="msg_nope"))
    assert bad.value.param == "after" and bad.value.item_id == "msg_nope"


async def test_ttl_hides_then_purges(store: Store, clock: Clock) -> None:
    await store.save_response(None, response("resp_old"), [message("msg_a", "x")], events(1))
    await store.create_conversation(None, conversation("conv_old"), [message("msg_c", "c")])
    clock.now += 60
    await store.save_response(None, response("resp_new"), [], [])
    clock.now += 50  # resp_old and conv_old are 110s old: past the 100s time to live
    assert await store.get_response(None, "resp_old") is None
    assert await store.get_conversation(None, "conv_old") is None
    assert await store.find_item(None, "msg_a") is None  # hidden before the purge, too
    assert await store.find_item(None, "msg_c") is None
    assert await store.purge_expired() == 2
    assert await store.find_item(None, "msg_a") is None
    assert await store.find_item(None, "msg_c") is None
    assert await store.get_response(None, "resp_new") is not None
    assert await store.purge_expired() == 0


def conversation(cid: str, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": cid, "object": "conversation", "created_at": 5, "metadata": metadata or {}}


async def test_conversations(store: Store) -> None:
    await store.create_conversation("t", conversation("conv_1", {"a": "1"}), [message("m0", "0")])
    assert await store.get_conversation("t", "conv_1") == conversation("conv_1", {"a": "1"})
    assert await store.get_conversation("other", "conv_1") is None
    assert await store.add_conversation_items(
        "t", "conv_1", [message("m1", "1"), message("m2", "2")]
    )
    assert not await store.add_conversation_items("other", "conv_1", [message("m9", "9")])
    items = await store.conversation_items("t", "conv_1")
    assert [i["id"] for i in items] == ["m0", "m1", "m2"]
    assert await store.get_conversation_item("t", "conv_1", "m1") == message("m1", "1")
    assert await store.get_conversation_item("other", "conv_1", "m1") is None
    assert await store.delete_conversation_item("t", "conv_1", "m1")
    assert not await store.delete_conversation_item("t", "conv_1", "m1")
    assert await store.add_conversation_items("t", "conv_1", [message("m3", "3")])
    page = await store.list_items("t", "conversation", "conv_1", ListQuery(order="asc"))
    assert page is not None and [i["id"] for i in page.data] == ["m0", "m2", "m3"]
    updated = await store.update_conversation("t", "conv_1", {"b": "2"})
    assert updated == conversation("conv_1", {"b": "2"})
    assert await store.update_conversation("other", "conv_1", {}) is None
    assert not await store.delete_conversation("other", "conv_1")
    assert await store.delete_conversation("t", "conv_1")
    assert await store.get_conversation("t", "conv_1") is None
    assert await store.find_item("t", "m0") is None


async def test_response_appends_to_its_conversation(store: Store) -> None:
    await store.create_conversation(None, conversation("conv_1"), [message("m0", "0")])
    await store.save_response(
        None, response("resp_1"), [message("m1", "1")], [], conversation_id="conv_1"
    )
    items = await store.conversation_items(None, "conv_1")
    assert [i["id"] for i in items] == ["m0", "m1", "msg_out_resp_1"]


async def test_concurrent_appends_keep_every_item(store: Store) -> None:
    await store.create_conversation(None, conversation("conv_1"), [])
    await asyncio.gather(
        *(
            store.add_conversation_items(None, "conv_1", [message(f"m{i}", str(i))])
            for i in range(20)
        )
    )
    items = await store.conversation_items(None, "conv_1")
    assert sorted(i["id"] for i in items) == sorted(f"m{i}" for i in range(20))


async def test_operations_cancelled_anywhere_leave_the_store_whole(store: Store) -> None:
    """A client that hangs up cancels its request wherever it is: waiting for the writer,
    inside BEGIN, between statements, in COMMIT, in its ROLLBACK. Every later operation
    still works, and each cancelled write is all or nothing."""
    await store.save_response(None, response("resp_read"), [], events(3))
    saved = []
    for step in range(40):
        rids = [f"resp_{step}_{i}" for i in range(3)]
        saved += rids
        tasks = [
            *(
                asyncio.create_task(store.save_response(None, response(r), [], events(400)))
                for r in rids
            ),
            asyncio.create_task(store.get_response(None, "resp_read")),
            asyncio.create_task(store.events_after(None, "resp_read", 0)),
        ]
        await asyncio.sleep(step / 20_000)  # 0 to 2 ms: a different point each time
        while not all(task.done() for task in tasks):
            for task in tasks:  # again at every await, as anyio's cancel scopes do
                task.cancel()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
    await store.save_response(None, response("resp_after"), [], events(2))
    assert await store.get_response(None, "resp_after") is not None
    for rid in saved:
        kept = await store.events_after(None, rid, -1)
        assert kept is None or len(kept) == 400, rid


async def test_reads_do_not_wait_for_an_open_write(store: Store) -> None:
    assert isinstance(store, SQLStore)
    await store.save_response(None, response("resp_1", "in_progress", []), [], events(2))
    async with store.transaction("slow_write") as tx:
        await tx.execute("UPDATE responses SET status = 'completed' WHERE id = 'resp_1'")
        found = await asyncio.wait_for(store.get_response(None, "resp_1"), 2)
        assert found is not None and found.response["status"] == "in_progress"


async def test_running_response_events_and_orphans(store: Store, clock: Clock) -> None:
    await store.save_response("t", response("resp_bg", "queued", []), [], events(2), runner="a")
    await store.append_events(
        "t", "resp_bg", events(3, start=2), response("resp_bg", "in_progress", [])
    )
    tail = await store.events_after("t", "resp_bg", 1)
    assert [e["sequence_number"] for e in tail or []] == [2, 3, 4]
    await store.heartbeat("a")
    assert await store.orphans("a", stale_after=10) == []  # its own runs are never orphans
    orphans = await store.orphans("b", stale_after=10)
    if store.exclusive:  # SQLite: one process, so runner "a" is gone whatever its heartbeat
        assert [(t, r["id"]) for t, r in orphans] == [("t", "resp_bg")]
    else:  # PostgreSQL: "a" is alive until its heartbeat is stale
        assert orphans == []
        clock.now += 11
        assert [(t, r["id"]) for t, r in await store.orphans("b", stale_after=10)] == [
            ("t", "resp_bg")
        ]
    failed = {**response("resp_bg", "failed", []), "error": {"code": "x", "message": "y"}}
    terminal = {"type": "response.failed", "sequence_number": 5, "response": failed}
    assert await store.end_unfinished("t", "resp_bg", failed, [terminal])
    assert not await store.end_unfinished("t", "resp_bg", failed, [terminal])
    assert await store.orphans("b", stale_after=10) == []
    stored = await store.get_response("t", "resp_bg")
    assert stored is not None and stored.response["status"] == "failed"
    assert await store.events_after("t", "resp_bg", 4) == [terminal]  # written once


async def test_a_started_run_is_handed_back_to_the_queue_by_its_runner_only(
    store: Store,
) -> None:
    request = {"input": "hi", "background": True}
    queued = response("resp_h", "queued", [])
    await store.save_response("t", queued, [], events(2), request=request)
    assert [r["id"] for _, r, _ in await store.claim("a", 1)] == ["resp_h"]
    assert await store.begin_claimed(
        "t", "resp_h", "a", events(3, start=2), response("resp_h", "in_progress", [])
    )
    assert not await store.hand_back("b", "t", "resp_h", queued, 2)  # not b's run
    assert not await store.hand_back("a", "other", "resp_h", queued, 2)
    assert await store.hand_back("a", "t", "resp_h", queued, 2)
    stored = await store.get_response("t", "resp_h")
    assert stored is not None and stored.response == queued
    assert [e["sequence_number"] for e in await store.events_after("t", "resp_h", -1) or []] == [
        0,
        1,
    ]
    assert [r["id"] for _, r, _ in await store.claim("b", 1)] == ["resp_h"]  # anyone's again
    failed = {**response("resp_h", "failed", []), "error": {"code": "x", "message": "y"}}
    assert await store.end_unfinished("t", "resp_h", failed, [])
    assert not await store.hand_back("b", "t", "resp_h", queued, 2)  # ended: stays so


async def test_queue_claims_each_run_once_and_requeues_a_dead_claimer(
    store: Store, clock: Clock
) -> None:
    request = {"input": "hi", "background": True}
    for i in range(5):
        queued = {**response(f"resp_q{i}", "queued", []), "created_at": i + 1}
        await store.save_response("t", queued, [], events(2), request=request)
    assert await store.orphans("a", stale_after=10) == []  # waiting in the queue is fine
    await store.heartbeat("a")
    first = await store.claim("a", 2)
    assert [(t, r["id"], q) for t, r, q in first] == [
        ("t", "resp_q0", request),
        ("t", "resp_q1", request),
    ]
    assert not await store.claim_one("b", "t", "resp_q0")  # taken
    assert await store.claim_one("b", "t", "resp_q2")
    # Claims racing each other (a pool of connections on PostgreSQL) never share a row.
    rest = await asyncio.gather(*(store.claim(f"r{i}", 5) for i in range(4)))
    assert sorted(r["id"] for claimed in rest for _, r, _ in claimed) == ["resp_q3", "resp_q4"]
    assert await store.claim("c", 5) == []
    # "a" dies before starting its runs: they go back to the queue, for anyone.
    clock.now += 11
    await store.heartbeat("c")
    requeued = await store.requeue("c", stale_after=10)
    assert requeued == 5  # q0, q1 of "a"; q2 of "b"; q3, q4 of r0..r3: all silent
    again = await store.claim("c", 10)
    assert sorted(r["id"] for _, r, _ in again) == [f"resp_q{i}" for i in range(5)]
    assert await store.requeue("c", stale_after=10) == 0  # its own claims stay its own
    await store.release("d", "resp_q0")  # not its claim: nothing changes
    await store.release("c", "resp_q0")
    assert [r["id"] for _, r, _ in await store.claim("e", 10)] == ["resp_q0"]
    # Starting is fenced by the claim: only its holder starts it, and only once.
    started = response("resp_q0", "in_progress", [])
    assert not await store.begin_claimed("t", "resp_q0", "c", events(1, start=2), started)
    assert await store.begin_claimed("t", "resp_q0", "e", events(1, start=2), started)
    assert not await store.begin_claimed("t", "resp_q0", "e", events(1, start=3), started)
    assert [e["sequence_number"] for e in await store.events_after("t", "resp_q0", -1) or []] == [
        0,
        1,
        2,
    ]
    await store.release("e", "resp_q0")  # started: it is no longer queued
    assert await store.claim("z", 10) == []
    # A finished response leaves the queue for good.
    await store.save_response("t", response("resp_q1"), [], events(3))
    await store.release("c", "resp_q1")
    assert await store.claim("f", 10) == []


async def test_cancel_requests_are_kept_for_the_runner(store: Store) -> None:
    await store.save_response("t", response("resp_bg", "in_progress", []), [], events(1))
    running = response("resp_bg", "in_progress", [])
    assert not await store.append_events("t", "resp_bg", events(1, start=1), running)
    await store.request_cancel("other", "resp_bg")  # not theirs: no effect
    assert not await store.append_events("t", "resp_bg", events(1, start=2), running)
    await store.request_cancel("t", "resp_bg")
    assert await store.append_events("t", "resp_bg", events(1, start=3), running)


async def test_cancel_requests_are_found_among_a_runners_runs(store: Store) -> None:
    for rid in ("resp_a", "resp_b", "resp_c"):
        await store.save_response("t", response(rid, "in_progress", []), [], events(1))
    assert await store.cancels_requested([]) == []
    await store.request_cancel("t", "resp_a")
    await store.request_cancel("t", "resp_c")
    await store.request_cancel("other", "resp_b")  # not theirs: no effect
    assert sorted(await store.cancels_requested(["resp_a", "resp_b", "resp_x"])) == ["resp_a"]
    assert sorted(await store.cancels_requested(["resp_a", "resp_c"])) == ["resp_a", "resp_c"]


async def test_signals_reach_subscribers(store: Store) -> None:
    got: list[tuple[str, str]] = []
    arrived = asyncio.Event()

    def handler(kind: str, response_id: str) -> None:
        got.append((kind, response_id))
        arrived.set()

    store.subscribe(handler)
    await store.publish("cancel", "resp_1")
    await asyncio.wait_for(arrived.wait(), 5)
    assert got == [("cancel", "resp_1")]


async def test_migrations_are_recorded_and_not_rerun(store: Store) -> None:
    from respond.store.sql import SQLStore

    assert isinstance(store, SQLStore)
    assert await store.migrate() == []


def test_schema_is_split_from_the_url() -> None:
    assert split_schema("postgresql://u@h/db?schema=s1&sslmode=disable") == (
        "postgresql://u@h/db?sslmode=disable",
        "s1",
    )
    assert split_schema("postgresql://u@h/db") == ("postgresql://u@h/db", "public")
    with pytest.raises(ValueError):
        split_schema("postgresql://u@h/db?schema=a;drop")


async def test_one_process_per_sqlite_file(tmp_path: Path) -> None:
    first = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=10)
    await first.open()
    second = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=10)
    with pytest.raises(RuntimeError, match="another respond process"):
        await second.open()
    await first.close()
    journal = await _journal_mode(tmp_path / "s.sqlite3")
    assert journal == "wal"


async def _journal_mode(path: Path) -> str:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


async def test_postgres_signals_cross_connections() -> None:
    """Two stores on one schema (two replicas): a signal from one reaches the other."""
    url, schema = new_schema_url()
    a, b = PostgresStore(url, ttl_seconds=10), PostgresStore(url, ttl_seconds=10)
    await asyncio.gather(a.open(), b.open())  # migrating together must be safe
    try:
        arrived = asyncio.Event()
        got: list[tuple[str, str]] = []

        def handler(kind: str, response_id: str) -> None:
            got.append((kind, response_id))
            arrived.set()

        b.subscribe(handler)
        await a.publish("events", "resp_9")
        await asyncio.wait_for(arrived.wait(), 5)
        assert got == [("events", "resp_9")]
    finally:
        await a.close()
        await b.close()
        await drop_schema(schema)


async def test_postgres_listen_survives_a_lost_connection() -> None:
    """PostgreSQL restarts or kills the LISTEN connection: signals keep arriving."""
    url, schema = new_schema_url()
    a, b = PostgresStore(url, ttl_seconds=10), PostgresStore(url, ttl_seconds=10)
    await a.open()
    await b.open()
    try:
        got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        b.subscribe(lambda kind, rid: got.put_nowait((kind, rid)))
        listener = b._listener
        assert listener is not None
        async with a.transaction() as tx:
            await tx.fetch("SELECT pg_terminate_backend(?)", listener.get_server_pid())
        for _ in range(100):
            if b._listener is not None and b._listener is not listener:
                break
            await asyncio.sleep(0.05)
        await a.publish("cancel", "resp_2")
        assert await asyncio.wait_for(got.get(), 5) == ("cancel", "resp_2")
    finally:
        await a.close()
        await b.close()
        await drop_schema(schema)


async def test_postgres_readers_do_not_wait_for_writers() -> None:
    """A follower reading events while the run's final record is being written gets an
    answer at once (it once locked the row, waited, then found it gone)."""
    import asyncpg

    url, schema = new_schema_url()
    store = PostgresStore(url, ttl_seconds=10)
    await store.open()
    writer = await asyncpg.connect(store.dsn, server_settings={"search_path": schema})
    try:
        await store.save_response(None, response("resp_1", "in_progress", []), [], events(3))
        async with writer.transaction():
            await writer.execute("UPDATE responses SET status = 'completed' WHERE id = 'resp_1'")
            found = await asyncio.wait_for(store.events_after(None, "resp_1", 0), 2)
            stored = await asyncio.wait_for(store.get_response(None, "resp_1"), 2)
        assert [e["sequence_number"] for e in found or []] == [1, 2]
        assert stored is not None and stored.response["status"] == "in_progress"
    finally:
        await writer.close()
        await store.close()
        await drop_schema(schema)
