"""Files across restarts and tenants: indexing left unfinished by a process that died is
done again (or failed) by the next one, and one tenant's files and stores are another's 404."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path

import asyncpg
import openai
import pytest

from respond.store.chunks import MAX_ATTEMPTS
from tests.support.clients import openai_client
from tests.support.server import start_server
from tests.support.stores import PG_URL, drop_schema, new_schema_url


def _interrupt(db: Path, store_id: str, file_id: str, attempts: int) -> None:
    """Make the file look like a dead process was indexing it: claimed, chunks gone."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE vector_store_files SET status = 'in_progress', "
            "body = json_set(body, '$.status', 'in_progress'), claimed_by = 'runner_gone', "
            "claimed_at = 0, attempts = ? WHERE vector_store_id = ? AND file_id = ?",
            (attempts, store_id, file_id),
        )
        where = "vector_store_id = ? AND file_id = ?"
        conn.execute(
            f"DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE {where})",
            (store_id, file_id),
        )
        conn.execute(f"DELETE FROM chunks WHERE {where}", (store_id, file_id))


def _settled(client: openai.OpenAI, store_id: str, file_id: str) -> str:
    deadline = time.monotonic() + 120
    while True:
        entry = client.vector_stores.files.retrieve(file_id=file_id, vector_store_id=store_id)
        if entry.status != "in_progress":
            return entry.status
        assert time.monotonic() < deadline, entry
        time.sleep(0.1)


def test_interrupted_indexing_is_redone_or_failed_after_a_restart(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "1")
    with openai_client(server.base_url) as client:
        store = client.vector_stores.create(name="restart")
        redo, give_up = (
            client.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=(name, b"notes on the migration of cranes")
            )
            for name in ("redo.txt", "give-up.txt")
        )
    server.stop()
    db = tmp_path / "data" / "respond.sqlite3"
    _interrupt(db, store.id, redo.id, attempts=1)
    _interrupt(db, store.id, give_up.id, attempts=MAX_ATTEMPTS)

    server = start_server(tmp_path, "--threads", "1")
    try:
        with openai_client(server.base_url) as client:
            assert _settled(client, store.id, redo.id) == "completed"
            assert _settled(client, store.id, give_up.id) == "failed"
            failed = client.vector_stores.files.retrieve(
                file_id=give_up.id, vector_store_id=store.id
            )
            assert failed.last_error is not None and "interrupted" in failed.last_error.message
            hits = client.vector_stores.search(store.id, query="cranes").data
            assert [hit.file_id for hit in hits] == [redo.id]
    finally:
        server.stop()


@pytest.mark.pg
def test_replicas_share_files_and_take_over_a_dead_replicas_indexing(tmp_path: Path) -> None:
    url, schema = new_schema_url()
    first = start_server(tmp_path / "a", "--threads", "1", "--store", url)
    second = start_server(tmp_path / "b", "--threads", "1", "--store", url)
    try:
        with openai_client(first.base_url) as a, openai_client(second.base_url) as b:
            store = a.vector_stores.create(name="shared")
            entry = a.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=("tides.txt", b"tides follow the moon")
            )
            # The other replica serves the same file, store and chunks.
            assert b.files.content(entry.id).read() == b"tides follow the moon"
            assert [h.file_id for h in b.vector_stores.search(store.id, query="tides").data] == [
                entry.id
            ]
            # A replica that died while indexing (its claim stays, it never heartbeats again):
            # a live one takes the file over and indexes it again.
            asyncio.run(_interrupt_pg(schema, store.id, entry.id))
            assert _settled(b, store.id, entry.id) == "completed"
            # Its chunks were gone: found again, it was indexed again.
            assert [h.file_id for h in a.vector_stores.search(store.id, query="moon").data] == [
                entry.id
            ]
    finally:
        first.stop()
        second.stop()
        asyncio.run(drop_schema(schema))


async def _interrupt_pg(schema: str, store_id: str, file_id: str) -> None:
    conn = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        async with conn.transaction():
            await conn.execute(
                "UPDATE vector_store_files SET status = 'in_progress', "
                "body = jsonb_set(body::jsonb, '{status}', '\"in_progress\"')::text, "
                "claimed_by = 'runner_gone', claimed_at = 0, attempts = 1 "
                "WHERE vector_store_id = $1 AND file_id = $2",
                store_id,
                file_id,
            )
            await conn.execute(
                "DELETE FROM chunks WHERE vector_store_id = $1 AND file_id = $2", store_id, file_id
            )
    finally:
        await conn.close()


def test_another_tenant_gets_404_everywhere(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice:key-alice\nbob:key-bob\n")
    server = start_server(tmp_path, "--threads", "1", "--api-key-file", str(keys))
    alice = openai_client(server.base_url, api_key="key-alice")
    bob = openai_client(server.base_url, api_key="key-bob")
    try:
        file = alice.files.create(file=("a.txt", b"alice's secret plans"), purpose="assistants")
        store = alice.vector_stores.create(name="alice", file_ids=[file.id])
        assert alice.vector_stores.files.poll(file.id, vector_store_id=store.id).status == (
            "completed"
        )
        for call in (
            lambda: bob.files.retrieve(file.id),
            lambda: bob.files.content(file.id),
            lambda: bob.files.delete(file.id),
            lambda: bob.vector_stores.retrieve(store.id),
            lambda: bob.vector_stores.search(store.id, query="plans"),
            lambda: bob.vector_stores.files.list(vector_store_id=store.id),
            lambda: bob.vector_stores.delete(store.id),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        own = bob.vector_stores.create(name="bob")
        with pytest.raises(openai.NotFoundError) as exc:
            bob.vector_stores.files.create(vector_store_id=own.id, file_id=file.id)
        assert isinstance(exc.value.body, dict) and exc.value.body["param"] == "file_id"
        assert file.id not in [f.id for f in bob.files.list()]
        assert store.id not in [s.id for s in bob.vector_stores.list()]
        # Alice's are untouched.
        assert alice.vector_stores.search(store.id, query="plans").data
    finally:
        alice.close()
        bob.close()
        server.stop()
