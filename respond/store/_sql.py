"""What every SQL room of the store shares: transactions, migrations and a few helpers.

SQLite and PostgreSQL differ only in how they run a statement.

Statements are written with `?` placeholders and plain types that both databases accept;
a backend supplies `_transaction()` (and PostgreSQL rewrites `?` as `$1, $2...`).

A backend's `_transaction()` keeps the contract stated in store/base.py: one writer at a time,
reads in `readonly` transactions of their own that never wait for a writer, and every
transaction committed whole or rolled back on every path, cancellation included.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import resources
from typing import Any, Protocol

from respond.store.base import (
    JSON,
    ItemOwner,
    Store,
    StoreFullError,
    StoreUnavailableError,
    UnknownCursorError,
)

__all__ = ["UNFINISHED", "SQLBase", "Tx", "migrations"]

UNFINISHED = ("queued", "in_progress")


class Tx(Protocol):
    """One open transaction."""

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement; returns the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...


DIALECTS = ("sqlite", "postgres")


def migrations(dialect: str = "") -> list[tuple[str, list[str]]]:
    """(name, statements) of every migration file for `dialect`, in name order.

    `NAME.sql` is for both databases; `NAME.sqlite.sql` / `NAME.postgres.sql` for one only,
    where the two cannot share a spelling (full-text search, bytes). Both are recorded as NAME.
    """
    folder = resources.files("respond.store") / "migrations"
    out = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        stem = entry.name.removesuffix(".sql")
        name, _, only = stem.rpartition(".")
        if only in DIALECTS and only != dialect:
            continue
        text = "\n".join(
            line for line in entry.read_text().splitlines() if not line.lstrip().startswith("--")
        )
        statements = [s.strip() for s in text.split(";") if s.strip()]
        out.append((name if only in DIALECTS else stem, statements))
    return out


def _tenant(tenant: str | None) -> str:
    # NULL never equals NULL in SQL; the no-key tenant is stored as ''.
    return tenant or ""


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class SQLBase(Store):
    # PostgreSQL locks the conversation row while appending; SQLite's writer lock suffices.
    for_update = ""
    dialect = ""  # which NAME.<dialect>.sql migrations apply: "sqlite" or "postgres"
    # Claiming queued runs: PostgreSQL skips rows another replica is claiming right now.
    skip_locked = ""

    def __init__(self, *, ttl_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._handlers: list[Callable[[str, str], None]] = []

    def subscribe(self, handler: Callable[[str, str], None]) -> None:
        self._handlers.append(handler)

    async def publish(self, kind: str, response_id: str) -> None:
        """In-process delivery; a store shared by processes overrides this."""
        self._deliver(kind, response_id)

    def _deliver(self, kind: str, response_id: str) -> None:
        for handler in self._handlers:
            handler(kind, response_id)

    @abstractmethod
    def _transaction(self, *, readonly: bool = False) -> AbstractAsyncContextManager[Tx]: ...

    @asynccontextmanager
    async def transaction(
        self, operation: str = "transaction", *, readonly: bool = False
    ) -> AsyncIterator[Tx]:
        """One transaction, timed for the store's observer (/metrics) under `operation`.

        `readonly`: it only reads, and sees the data as of its start; it never waits for a
        writer (SQLite's reader connections) and may run beside other reads.
        """
        started = time.perf_counter()
        try:
            async with self._transaction(readonly=readonly) as tx:
                yield tx
        except Exception as exc:
            # A bad cursor is the client's mistake, not the store's.
            self._observe(operation, started, failed=not isinstance(exc, UnknownCursorError))
            if isinstance(exc, StoreFullError):
                self.full = True
            elif isinstance(exc, StoreUnavailableError):
                self.unreachable = True
            raise
        self.unreachable = False
        if not readonly:
            self.full = False
        self._observe(operation, started, failed=False)

    def _observe(self, operation: str, started: float, *, failed: bool) -> None:
        if self.observer is not None:
            self.observer(operation, time.perf_counter() - started, failed)

    async def _lock_migrations(self, tx: Tx) -> None:
        """Keep two processes starting at once from migrating together."""

    def _now(self) -> int:
        return int(self._clock())

    async def migrate(self) -> list[str]:
        applied_now = []
        async with self.transaction("migrate") as tx:
            await self._lock_migrations(tx)
            await tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            applied = {row[0] for row in await tx.fetch("SELECT name FROM schema_migrations")}
            for name, statements in migrations(self.dialect):
                if name in applied:
                    continue
                for statement in statements:
                    await tx.execute(statement)
                await tx.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    name,
                    self._now(),
                )
                applied_now.append(name)
        return applied_now

    # ------------------------------------------------------------ shared by the rooms

    async def _insert_items(
        self, tx: Tx, tenant: str, owner: ItemOwner, owner_id: str, start: int, items: list[JSON]
    ) -> None:
        if items:
            await tx.executemany(
                "INSERT INTO items (owner_id, owner, position, item_id, tenant, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (owner_id, owner, start + i, item["id"], tenant, _dump(item))
                    for i, item in enumerate(items)
                ],
            )

    async def _insert_events(self, tx: Tx, rid: str, events: list[JSON]) -> None:
        if events:
            await tx.executemany(
                "INSERT INTO response_events (response_id, seq, body) VALUES (?, ?, ?)",
                [(rid, event["sequence_number"], _dump(event)) for event in events],
            )

    async def _owned(
        self, tx: Tx, table: str, tenant: str | None, object_id: str, *, lock: bool = False
    ) -> bool:
        """The object exists for this tenant (and, with `lock`, is locked until commit)."""
        rows = await tx.fetch(
            f"SELECT id FROM {table} WHERE id = ? AND tenant = ? AND expires_at > ?"
            f"{self.for_update if lock else ''}",
            object_id,
            _tenant(tenant),
            self._now(),
        )
        return bool(rows)

    async def _append(self, tx: Tx, tenant: str, conversation_id: str, items: list[JSON]) -> bool:
        if not await self._owned(tx, "conversations", tenant, conversation_id, lock=True):
            return False
        rows = await tx.fetch(
            "SELECT MAX(position) FROM items WHERE owner_id = ? AND owner = 'conversation'",
            conversation_id,
        )
        start = 0 if rows[0][0] is None else int(rows[0][0]) + 1
        await self._insert_items(tx, tenant, "conversation", conversation_id, start, items)
        # A conversation in use lives on: its time to live restarts with every turn.
        await tx.execute(
            "UPDATE conversations SET expires_at = ? WHERE id = ?",
            self._now() + self.ttl_seconds,
            conversation_id,
        )
        return True
