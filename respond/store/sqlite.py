"""The default store: one SQLite file in the data directory, in WAL mode.

sqlite3 blocks, so each connection runs its statements on a thread of its own, one at a
time and in the order they were submitted, each one to the end even if its caller is
cancelled. That order is what keeps transactions whole: whatever a cancelled request left
running, the ROLLBACK submitted after it runs after it, and before the next BEGIN.

- Writes go through the one writer connection, one transaction at a time (an asyncio lock):
  SQLite allows one writer, so they queue here instead of colliding in the database.
- Reads go to a small pool of reader connections. In WAL mode a reader sees the last
  commit as of its BEGIN and neither waits for the writer nor holds it up, so a GET or a
  stream resume never waits behind (or shares) a writer's transaction.

A single respond process owns a data directory (an exclusive lock file enforces it): crash
recovery relies on that.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from respond.store.base import StoreFullError
from respond.store.sql import SQLStore, Tx

__all__ = ["SQLiteStore"]

T = TypeVar("T")

READERS = 4  # reader connections: GETs, resumes and searches run this many at once


# A cursor never leaves its connection's thread: each call below closes its cursor there
# and returns plain values. A cursor freed on another thread (the event loop's, which
# receives what a call returns) resets its cached statement from there, while the
# connection's thread may be running that statement: CPython's sqlite3 shares statements
# between cursors without a lock (python/cpython#118172). The likely cause of a write
# failing now and then with "bad parameter or other API misuse".
def _execute(conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> int:
    """Runs `sql`; the rows it changed."""
    with contextlib.closing(conn.execute(sql, args)) as cursor:
        return cursor.rowcount


def _executemany(conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    conn.executemany(sql, rows).close()


def _fetch(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[Sequence[Any]]:
    with contextlib.closing(conn.execute(sql, args)) as cursor:
        return cursor.fetchall()


def _rollback(conn: sqlite3.Connection) -> None:
    # BEGIN may itself have failed (or never run): there may be nothing to roll back.
    if conn.in_transaction:
        _execute(conn, "ROLLBACK")


def _commit(conn: sqlite3.Connection) -> None:
    try:
        _execute(conn, "COMMIT")
    except sqlite3.Error:
        _rollback(conn)  # a failed COMMIT (a full disk) leaves the transaction open
        raise


def _no_space_said(fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    try:
        return fn(conn)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
            raise StoreFullError() from exc
        raise


class _Connection:
    """One sqlite3 connection and the one thread that runs its statements, in order."""

    def __init__(self, path: Path, *, reader: bool) -> None:
        self._path = path
        self._reader = reader
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="respond-sqlite")
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        _execute(conn, "PRAGMA busy_timeout=10000")
        if self._reader:
            _execute(conn, "PRAGMA query_only=ON")
        else:
            _execute(conn, "PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL survives a process crash (a power cut may lose the last commits).
            _execute(conn, "PRAGMA synchronous=NORMAL")
        self._conn = conn

    async def open(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._connect)

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Submit `fn` at once; it runs whether or not the caller still waits for it.

        A cancelled caller must not take its statement out of the queue: anyio (under
        Starlette's streaming responses) cancels a task again at every await, so a ROLLBACK
        awaited by a cancelled task would be dropped before it ran, and the transaction left
        open for the next one. Shielded, every statement runs, in order.
        """
        conn = self._conn
        assert conn is not None, "the store is not open"
        return asyncio.shield(asyncio.wrap_future(self._thread.submit(_no_space_said, fn, conn)))

    @asynccontextmanager
    async def transaction(self, begin: str) -> AsyncIterator[Tx]:
        """BEGIN .. COMMIT, or ROLLBACK on any exception (cancellation too); BEGIN inside."""
        try:
            await self.run(lambda c: _execute(c, begin))
            yield _SQLiteTx(self)
        except BaseException:
            await self.run(_rollback)
            raise
        await self.run(_commit)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, conn.close)
        self._thread.shutdown(wait=True)


class _SQLiteTx:
    def __init__(self, conn: _Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> int:
        return await self._conn.run(lambda c: _execute(c, sql, args))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.run(lambda c: _executemany(c, sql, rows))

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._conn.run(lambda c: _fetch(c, sql, args))


class SQLiteStore(SQLStore):
    exclusive = True
    dialect = "sqlite"

    def __init__(
        self, path: Path, *, ttl_seconds: int, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(ttl_seconds=ttl_seconds, clock=clock)
        self.path = path
        self._writer = _Connection(path, reader=False)
        self._write_lock = asyncio.Lock()
        self._readers: asyncio.Queue[_Connection] = asyncio.Queue()
        self._all_readers: list[_Connection] = []
        self._lock_fd: int | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._take_directory()
        _owner_only(self.path)
        await self._writer.open()  # first: it switches the file to WAL
        await self.migrate()
        for _ in range(READERS):
            reader = _Connection(self.path, reader=True)
            await reader.open()
            self._all_readers.append(reader)
            self._readers.put_nowait(reader)

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

    async def close(self) -> None:
        async with self._write_lock:
            await self._writer.close()
        for reader in self._all_readers:
            await reader.close()
        self._all_readers.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @asynccontextmanager
    async def _transaction(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        if readonly:
            reader = await self._readers.get()
            try:
                async with reader.transaction("BEGIN") as tx:
                    yield tx
            finally:
                self._readers.put_nowait(reader)  # after its ROLLBACK/COMMIT was submitted
        else:
            async with self._write_lock, self._writer.transaction("BEGIN IMMEDIATE") as tx:
                yield tx


def _owner_only(path: Path) -> None:
    """The database file readable by respond's user only (0600), made so before SQLite
    opens it: SQLite gives its -wal and -shm files the database file's mode. A file from an
    older respond, made 0644, is narrowed too, with its -wal and -shm files."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path.with_name(path.name + suffix), 0o600, follow_symlinks=False)
