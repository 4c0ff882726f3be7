"""The hourly purge deletes expired files, bytes and chunks, on both real stores: a SQLite
file and the local PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from respond.store.chunks import Chunk, ChunkStore
from respond.store.files import FileStore
from respond.store.housekeeping import purge_once
from respond.store.postgres import PostgresStore
from respond.store.sql import SQLStore
from respond.store.sqlite import SQLiteStore
from tests.support.stores import drop_schema, new_schema_url

NOW = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[SQLStore]:
    if request.param == "sqlite":
        sqlite = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=10**6, clock=clock)
        await sqlite.open()
        yield sqlite
        await sqlite.close()
        return
    url, schema = new_schema_url()
    pg = PostgresStore(url, ttl_seconds=10**6, clock=clock)
    await pg.open()
    try:
        yield pg
    finally:
        await pg.close()
        await drop_schema(schema)


def file(file_id: str, expires_at: int | None) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": 5,
        "created_at": NOW,
        "expires_at": expires_at,
        "filename": f"{file_id}.txt",
        "purpose": "assistants",
    }


async def index(store: SQLStore, store_id: str, file_id: str) -> None:
    files, chunks = FileStore(store), ChunkStore(store)
    entry = {"id": file_id, "object": "vector_store.file", "status": "in_progress"}
    assert await files.attach(None, store_id, {**entry, "created_at": NOW})
    claim = await chunks.claim("runner-1", 10)
    assert claim is not None and claim.entry["id"] == file_id
    text = f"herons of {file_id}"
    assert await chunks.finish("runner-1", claim, [Chunk(store_id, file_id, 0, text)])


async def count(store: SQLStore, sql: str, *args: object) -> int:
    async with store.transaction("count") as tx:
        rows = await tx.fetch(sql, *args)
    return int(rows[0][0])


async def test_expired_files_go_with_their_bytes_and_chunks(store: SQLStore, clock: Clock) -> None:
    files = FileStore(store)
    await files.create_file(None, file("file_old", NOW + 10), b"old!!")
    await files.create_file(None, file("file_kept", None), b"kept!")
    await files.create_file(None, file("file_later", NOW + 1000), b"later")
    vs = {"id": "vs_1", "object": "vector_store", "created_at": NOW, "last_active_at": NOW}
    await files.create_vector_store(None, vs)
    await index(store, "vs_1", "file_old")
    await index(store, "vs_1", "file_kept")

    assert await purge_once(store) == 0  # nothing has expired yet
    clock.now += 20
    assert await files.get_file(None, "file_old") is None  # hidden before the purge
    assert await count(store, "SELECT COUNT(*) FROM files WHERE id = ?", "file_old") == 1

    assert await purge_once(store) == 1
    assert await count(store, "SELECT COUNT(*) FROM files WHERE id = ?", "file_old") == 0
    assert await count(store, "SELECT COUNT(*) FROM chunks WHERE file_id = ?", "file_old") == 0
    where = "SELECT COUNT(*) FROM vector_store_files WHERE file_id = ?"
    assert await count(store, where, "file_old") == 0
    if store.dialect == "sqlite":  # the full-text rows went with the chunks
        assert await count(store, "SELECT COUNT(*) FROM chunks_fts") == 1
    # The others are untouched: bytes, chunks, their place in the vector store.
    kept = await files.file_content(None, "file_kept")
    assert kept is not None and kept[1] == b"kept!"
    assert await ChunkStore(store).file_chunks("vs_1", "file_kept") == ["herons of file_kept"]
    assert await files.get_file(None, "file_later") is not None
    assert await purge_once(store) == 0
