"""The SQLite store keeps every cursor on its connection's thread.

A cursor handed back to the event loop is freed there, and freeing a cursor resets its
statement, which CPython's sqlite3 shares with the cursors the connection's thread is
running (python/cpython#118172): a write then failed with "bad parameter or other API
misuse", once in a few thousand requests (respond/store/sqlite.py). Here every cursor the
store makes is watched: it must be closed, or freed, on the thread that made it.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from respond.store.sqlite import SQLiteStore

_connect = sqlite3.connect


class WatchedCursor:
    """A real cursor that notes the thread it was made on and the one it was let go on."""

    def __init__(self, cursor: sqlite3.Cursor, strays: list[str]) -> None:
        self._cursor = cursor
        self._made_on = threading.get_ident()
        self._strays = strays

    def _check(self, what: str) -> None:
        if self._cursor is not None and threading.get_ident() != self._made_on:
            self._strays.append(what)

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def close(self) -> None:
        self._check("closed on another thread")
        self._cursor.close()

    def __del__(self) -> None:
        self._check("freed on another thread")


class WatchedConnection:
    def __init__(self, conn: sqlite3.Connection, strays: list[str]) -> None:
        self._conn = conn
        self._strays = strays

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, args: Sequence[Any] = ()) -> WatchedCursor:
        return WatchedCursor(self._conn.execute(sql, args), self._strays)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> WatchedCursor:
        return WatchedCursor(self._conn.executemany(sql, rows), self._strays)

    def close(self) -> None:
        self._conn.close()


@pytest.fixture
def strays(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    found: list[str] = []
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: WatchedConnection(_connect(*a, **k), found)
    )
    yield found


def _response(rid: str) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": 1, "status": "completed", "output": []}


async def test_no_cursor_leaves_its_connections_thread(tmp_path: Path, strays: list[str]) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=100)
    await store.open()
    try:
        item = {"type": "message", "id": "msg_1", "role": "user", "content": []}
        events = [{"type": "x", "sequence_number": i} for i in range(3)]
        for n in range(3):  # BEGIN, executemany and fetch, on the writer and a reader
            await store.save_response("t", _response(f"resp_{n}"), [item], events)
            assert await store.get_response("t", f"resp_{n}") is not None
    finally:
        await store.close()
    gc.collect()
    assert strays == []
