"""The default store: one SQLite file in the data directory, in WAL mode.

sqlite3 blocks, so every statement runs on one dedicated thread (statements of one
connection must not interleave); transactions take an asyncio lock, so concurrent
requests queue instead of colliding. A single respond process owns a data directory
(an exclusive lock file enforces it): crash recovery relies on that.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from respond.store.sql import SQLStore, Tx

__all__ = ["SQLiteStore"]

T = TypeVar("T")


class _SQLiteTx:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def execute(self, sql: str, *args: Any) -> int:
        return await self._store._run(lambda c: c.execute(sql, args).rowcount)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._store._run(lambda c: c.executemany(sql, rows))

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._store._run(lambda c: c.execute(sql, args).fetchall())


class SQLiteStore(SQLStore):
    exclusive = True
    dialect = "sqlite"

    def __init__(
        self, path: Path, *, ttl_seconds: int, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(ttl_seconds=ttl_seconds, clock=clock)
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="respond-sqlite")
        self._lock = asyncio.Lock()
        self._lock_fd: int | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._take_directory()
        self._conn = await self._call(self._connect)
        await self.migrate()

    def _take_directory(self) -> None:
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(
                f"another respond process is using {self.path}; give each process its own "
                "--data-dir, or share state between replicas with --store postgresql://..."
            ) from None
        self._lock_fd = fd

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL survives a process crash (a power cut may lose the last commits).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            async with self._lock:
                await self._call(conn.close)
        self._thread.shutdown(wait=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _call(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        # Submitted at once, in order: even if the caller is cancelled while waiting,
        # a later ROLLBACK still runs after this statement, on the same thread.
        return asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        conn = self._conn
        assert conn is not None, "the store is not open"
        return self._call(lambda: fn(conn))

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Tx]:
        async with self._lock:
            await self._run(lambda c: c.execute("BEGIN IMMEDIATE"))
            try:
                yield _SQLiteTx(self)
            except BaseException:
                await self._run(lambda c: c.execute("ROLLBACK"))
                raise
            await self._run(lambda c: c.execute("COMMIT"))
