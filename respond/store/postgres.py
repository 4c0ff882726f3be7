"""The shared store: PostgreSQL through asyncpg, for one or several respond replicas.

`--store postgresql://user@host/db?schema=NAME` keeps respond's tables in schema NAME
(created if missing; default `public`). Migrations run at start under an advisory lock,
so replicas starting together migrate once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from respond.store.base import StoreFullError, StoreUnavailableError
from respond.store.sql import SQLStore, Tx

__all__ = ["PostgresStore", "split_schema"]

log = logging.getLogger("respond.store")

MIGRATION_LOCK = 0x7265_7370  # "resp": any constant shared by all replicas
RECONNECT_SECONDS = 10.0  # how long a transaction waits for a database that is restarting
# The database is not there: down, restarting, or the connection was lost with it.
_UNREACHABLE = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up
    asyncpg.InterfaceError,  # the connection is closed
    OSError,  # refused, reset, timed out
)


def split_schema(url: str) -> tuple[str, str]:
    """('postgresql://h/db?schema=s&x=1') -> ('postgresql://h/db?x=1', 's')."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), "public")
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ValueError(f"invalid schema name {schema!r} in the store URL")
    return urlunsplit(parts._replace(query=rest)), schema


_PLACEHOLDER = re.compile(r"\?")


def _numbered(sql: str) -> str:
    counter = iter(range(1, 1000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


class _PostgresTx:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> int:
        status: str = await self._conn.execute(_numbered(sql), *args)
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(_numbered(sql), rows)

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        records: list[Sequence[Any]] = await self._conn.fetch(_numbered(sql), *args)
        return records


class PostgresStore(SQLStore):
    for_update = " FOR UPDATE"
    dialect = "postgres"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(
        self, url: str, *, ttl_seconds: int, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(ttl_seconds=ttl_seconds, clock=clock)
        self.dsn, self.schema = split_schema(url)
        self.pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._relisten: asyncio.Future[None] | None = None
        # One channel per schema: stores in different schemas are different services.
        self.channel = f"respond_{self.schema}"

    async def open(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        except asyncpg.UniqueViolationError:
            pass  # another replica created it at the same moment
        finally:
            await conn.close()
        self.pool = await asyncpg.create_pool(
            self.dsn, min_size=1, max_size=10, server_settings={"search_path": self.schema}
        )
        await self.migrate()
        await self._listen()

    async def _listen(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        await conn.add_listener(self.channel, self._on_notify)
        conn.add_termination_listener(self._on_listener_lost)
        self._listener = conn

    def _on_listener_lost(self, _conn: object) -> None:
        if self.pool is None:
            return  # closing
        log.warning("lost the PostgreSQL LISTEN connection; reconnecting")
        self._listener = None
        self._relisten = asyncio.ensure_future(self._listen_again())

    async def _listen_again(self) -> None:
        while self.pool is not None and self._listener is None:
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("could not LISTEN again (%s); retrying", exc)
                await asyncio.sleep(1)

    async def close(self) -> None:
        pool = self.pool
        self.pool = None  # first: a listener closing now is not "lost"
        if self._relisten is not None:
            self._relisten.cancel()
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        if pool is not None:
            await pool.close()

    async def publish(self, kind: str, response_id: str) -> None:
        """LISTEN/NOTIFY: every replica on this schema (this one too) gets the signal."""
        async with self.transaction("publish") as tx:
            await tx.fetch("SELECT pg_notify(?, ?)", self.channel, f"{kind}:{response_id}")

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        kind, _, response_id = payload.partition(":")
        self._deliver(kind, response_id)

    async def _lock_migrations(self, tx: Tx) -> None:
        await tx.fetch("SELECT pg_advisory_xact_lock(?)", MIGRATION_LOCK)

    @asynccontextmanager
    async def _transaction(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        pool = self.pool
        assert pool is not None, "the store is not open"
        conn, tx = await self._begin(pool, readonly)
        try:
            try:
                yield _PostgresTx(conn)
            except BaseException:
                with contextlib.suppress(*_UNREACHABLE):
                    await tx.rollback()
                raise
            await tx.commit()
        except asyncpg.DiskFullError as exc:
            raise StoreFullError() from exc
        except _UNREACHABLE as exc:
            raise StoreUnavailableError(exc) from exc
        finally:
            # Shielded by asyncpg, and a connection still in a transaction is rolled back.
            await pool.release(conn)

    async def _begin(
        self, pool: asyncpg.Pool, readonly: bool
    ) -> tuple[asyncpg.Connection, asyncpg.transaction.Transaction]:
        """A pooled connection with its transaction begun. A connection that died with the
        database (a restart) fails at BEGIN, before anything was done: it is dropped and
        another tried, for up to RECONNECT_SECONDS, so a restart costs a pause, not errors."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            conn = None
            try:
                conn = await pool.acquire()
                tx = conn.transaction(readonly=readonly)
                await tx.start()
                return conn, tx
            except _UNREACHABLE as exc:
                if conn is not None:
                    await pool.release(conn)
                if time.monotonic() >= deadline:
                    raise StoreUnavailableError(exc) from exc
                await asyncio.sleep(0.25)
            except BaseException:
                if conn is not None:
                    await pool.release(conn)
                raise
