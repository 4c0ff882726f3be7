"""The store in SQL, once: SQLite and PostgreSQL differ only in how they run a statement.

Statements are written with `?` placeholders and plain types that both databases accept;
a backend supplies `_transaction()` (and PostgreSQL rewrites `?` as `$1, $2...`).
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
    ListQuery,
    Page,
    Store,
    StoredResponse,
    UnknownCursorError,
)

__all__ = ["SQLStore", "Tx", "migrations"]

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


class SQLStore(Store):
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
    def _transaction(self) -> AbstractAsyncContextManager[Tx]: ...

    @asynccontextmanager
    async def transaction(self, operation: str = "transaction") -> AsyncIterator[Tx]:
        """One transaction, timed for the store's observer (/metrics) under `operation`."""
        started = time.perf_counter()
        try:
            async with self._transaction() as tx:
                yield tx
        except Exception as exc:
            # A bad cursor is the client's mistake, not the store's.
            self._observe(operation, started, failed=not isinstance(exc, UnknownCursorError))
            raise
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

    # ------------------------------------------------------------ responses

    async def save_response(
        self,
        tenant: str | None,
        response: JSON,
        input_items: list[JSON],
        events: list[JSON],
        *,
        conversation_id: str | None = None,
        runner: str | None = None,
        request: JSON | None = None,
    ) -> None:
        rid, t, now = response["id"], _tenant(tenant), self._now()
        async with self.transaction("save_response") as tx:
            await self._drop_contents(tx, rid)
            # The row is updated in place, never deleted and re-inserted: a reader that
            # locks it meanwhile must find it again, not a deleted version.
            await tx.execute(
                "INSERT INTO responses "
                "(id, tenant, status, body, created_at, expires_at, runner, request) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "tenant = excluded.tenant, status = excluded.status, body = excluded.body, "
                "created_at = excluded.created_at, expires_at = excluded.expires_at, "
                "runner = excluded.runner, request = excluded.request",
                rid,
                t,
                response["status"],
                _dump(response),
                int(response.get("created_at") or now),
                now + self.ttl_seconds,
                runner,
                None if request is None else _dump(request),
            )
            await self._insert_items(tx, t, "input", rid, 0, input_items)
            await self._insert_items(tx, t, "output", rid, 0, list(response.get("output") or []))
            await self._insert_events(tx, rid, events)
            if conversation_id is not None:
                await self._append(tx, t, conversation_id, [*input_items, *response["output"]])

    async def _drop_contents(self, tx: Tx, rid: str) -> None:
        """A response's events and items."""
        await tx.execute("DELETE FROM response_events WHERE response_id = ?", rid)
        await tx.execute(
            "DELETE FROM items WHERE owner_id = ? AND owner IN ('input', 'output')", rid
        )

    async def _drop_response(self, tx: Tx, rid: str) -> int:
        await self._drop_contents(tx, rid)
        return await tx.execute("DELETE FROM responses WHERE id = ?", rid)

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

    async def get_response(self, tenant: str | None, response_id: str) -> StoredResponse | None:
        async with self.transaction("get_response") as tx:
            rows = await tx.fetch(
                "SELECT body FROM responses WHERE id = ? AND tenant = ? AND expires_at > ?",
                response_id,
                _tenant(tenant),
                self._now(),
            )
            if not rows:
                return None
            items = await tx.fetch(
                "SELECT body FROM items WHERE owner_id = ? AND owner = 'input' ORDER BY position",
                response_id,
            )
        response = json.loads(rows[0][0])
        return StoredResponse(
            response=response,
            input_items=[json.loads(row[0]) for row in items],
            output_items=list(response.get("output") or []),
        )

    async def delete_response(self, tenant: str | None, response_id: str) -> bool:
        async with self.transaction("delete_response") as tx:
            if not await self._owned(tx, "responses", tenant, response_id):
                return False
            return await self._drop_response(tx, response_id) > 0

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

    async def append_events(
        self, tenant: str | None, response_id: str, events: list[JSON], response: JSON
    ) -> bool:
        async with self.transaction("append_events") as tx:
            await self._insert_events(tx, response_id, events)
            await tx.execute(
                "UPDATE responses SET status = ?, body = ? WHERE id = ? AND tenant = ?",
                response["status"],
                _dump(response),
                response_id,
                _tenant(tenant),
            )
            rows = await tx.fetch(
                "SELECT cancel_requested FROM responses WHERE id = ?", response_id
            )
        return bool(rows and rows[0][0])

    async def request_cancel(self, tenant: str | None, response_id: str) -> None:
        async with self.transaction("request_cancel") as tx:
            await tx.execute(
                "UPDATE responses SET cancel_requested = 1 WHERE id = ? AND tenant = ?",
                response_id,
                _tenant(tenant),
            )

    async def events_after(
        self, tenant: str | None, response_id: str, after: int
    ) -> list[JSON] | None:
        async with self.transaction("events_after") as tx:
            if not await self._owned(tx, "responses", tenant, response_id):
                return None
            rows = await tx.fetch(
                "SELECT body FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq",
                response_id,
                after,
            )
        return [json.loads(row[0]) for row in rows]

    async def list_items(
        self, tenant: str | None, owner: ItemOwner, owner_id: str, query: ListQuery
    ) -> Page | None:
        table = "conversations" if owner == "conversation" else "responses"
        async with self.transaction("list_items") as tx:
            if not await self._owned(tx, table, tenant, owner_id):
                return None
            where, args = await self._cursor(tx, owner, owner_id, query)
            direction = "ASC" if query.order == "asc" else "DESC"
            rows = await tx.fetch(
                f"SELECT body FROM items WHERE owner_id = ? AND owner = ?{where} "
                f"ORDER BY position {direction} LIMIT ?",
                owner_id,
                owner,
                *args,
                query.limit + 1,
            )
        data = [json.loads(row[0]) for row in rows]
        return Page(data=data[: query.limit], has_more=len(data) > query.limit)

    async def _cursor(
        self, tx: Tx, owner: ItemOwner, owner_id: str, query: ListQuery
    ) -> tuple[str, list[Any]]:
        """SQL conditions for `after` / `before`, which are item ids in the list's order."""
        where, args = "", []
        for name, item_id in (("after", query.after), ("before", query.before)):
            if item_id is None:
                continue
            rows = await tx.fetch(
                "SELECT position FROM items WHERE owner_id = ? AND owner = ? AND item_id = ?",
                owner_id,
                owner,
                item_id,
            )
            if not rows:
                raise UnknownCursorError(name, item_id)
            later = (name == "after") == (query.order == "asc")
            where += f" AND position {'>' if later else '<'} ?"
            args.append(rows[0][0])
        return where, args

    async def find_item(self, tenant: str | None, item_id: str) -> JSON | None:
        async with self.transaction("find_item") as tx:
            now = self._now()
            rows = await tx.fetch(
                "SELECT body FROM items WHERE tenant = ? AND item_id = ? AND ("
                "(owner IN ('input', 'output') AND owner_id IN "
                "(SELECT id FROM responses WHERE expires_at > ?)) OR "
                "(owner = 'conversation' AND owner_id IN "
                "(SELECT id FROM conversations WHERE expires_at > ?))) LIMIT 1",
                _tenant(tenant),
                item_id,
                now,
                now,
            )
        return json.loads(rows[0][0]) if rows else None

    async def heartbeat(self, runner: str) -> None:
        async with self.transaction("heartbeat") as tx:
            await tx.execute(
                "INSERT INTO runners (id, seen_at) VALUES (?, ?) "
                "ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
                runner,
                self._now(),
            )

    def _alive_since(self, stale_after: int) -> int:
        # An exclusive store has one process: every other runner is dead.
        return self._now() + 1 if self.exclusive else self._now() - stale_after

    async def orphans(self, runner: str, stale_after: int) -> list[tuple[str | None, JSON]]:
        async with self.transaction("orphans") as tx:
            # A queued run that keeps its request waits in the queue: it is no orphan.
            rows = await tx.fetch(
                "SELECT r.tenant, r.body FROM responses r LEFT JOIN runners w ON w.id = r.runner "
                "WHERE r.status IN (?, ?) AND (r.runner IS NULL OR r.runner <> ?) "
                "AND (w.seen_at IS NULL OR w.seen_at < ?) "
                "AND NOT (r.status = 'queued' AND r.request IS NOT NULL)",
                *UNFINISHED,
                runner,
                self._alive_since(stale_after),
            )
        return [(row[0] or None, json.loads(row[1])) for row in rows]

    async def requeue(self, runner: str, stale_after: int) -> int:
        async with self.transaction("requeue") as tx:
            return await tx.execute(
                "UPDATE responses SET runner = NULL WHERE status = 'queued' "
                "AND request IS NOT NULL AND runner IS NOT NULL AND runner <> ? "
                "AND runner NOT IN (SELECT id FROM runners WHERE seen_at >= ?)",
                runner,
                self._alive_since(stale_after),
            )

    async def claim(self, runner: str, limit: int) -> list[tuple[str | None, JSON, JSON]]:
        if limit <= 0:
            return []
        async with self.transaction("claim") as tx:
            # One statement: a row is claimed by whoever changes it first, never twice.
            rows = await tx.fetch(
                "UPDATE responses SET runner = ? WHERE runner IS NULL AND id IN "
                "(SELECT id FROM responses WHERE status = 'queued' AND runner IS NULL "
                "AND request IS NOT NULL AND expires_at > ? ORDER BY created_at, id LIMIT ?"
                f"{self.skip_locked}) RETURNING tenant, body, request, created_at, id",
                runner,
                self._now(),
                limit,
            )
        rows = sorted(rows, key=lambda row: (row[3], row[4]))  # RETURNING keeps no order
        return [(row[0] or None, json.loads(row[1]), json.loads(row[2])) for row in rows]

    async def claim_one(self, runner: str, tenant: str | None, response_id: str) -> bool:
        async with self.transaction("claim_one") as tx:
            changed = await tx.execute(
                "UPDATE responses SET runner = ? WHERE id = ? AND tenant = ? "
                "AND status = 'queued' AND runner IS NULL",
                runner,
                response_id,
                _tenant(tenant),
            )
        return changed > 0

    async def begin_claimed(
        self, tenant: str | None, response_id: str, runner: str, events: list[JSON], response: JSON
    ) -> bool:
        async with self.transaction("begin_claimed") as tx:
            changed = await tx.execute(
                "UPDATE responses SET status = ?, body = ? WHERE id = ? AND tenant = ? "
                "AND runner = ? AND status = 'queued'",
                response["status"],
                _dump(response),
                response_id,
                _tenant(tenant),
                runner,
            )
            if changed:
                await self._insert_events(tx, response_id, events)
        return changed > 0

    async def release(self, runner: str, response_id: str) -> None:
        async with self.transaction("release") as tx:
            await tx.execute(
                "UPDATE responses SET runner = NULL WHERE id = ? AND runner = ? "
                "AND status = 'queued'",
                response_id,
                runner,
            )

    async def end_unfinished(
        self, tenant: str | None, response_id: str, response: JSON, events: list[JSON]
    ) -> bool:
        async with self.transaction("end_unfinished") as tx:
            rows = await tx.fetch(
                f"SELECT status FROM responses WHERE id = ? AND tenant = ?{self.for_update}",
                response_id,
                _tenant(tenant),
            )
            if not rows or rows[0][0] not in UNFINISHED:
                return False
            await self._insert_events(tx, response_id, events)
            # The request (MCP credentials too) is kept only while the run may still start.
            await tx.execute(
                "UPDATE responses SET status = ?, body = ?, request = NULL WHERE id = ?",
                response["status"],
                _dump(response),
                response_id,
            )
        return True

    # ------------------------------------------------------------ conversations

    async def create_conversation(
        self, tenant: str | None, conversation: JSON, items: list[JSON]
    ) -> None:
        t, now = _tenant(tenant), self._now()
        async with self.transaction("create_conversation") as tx:
            await tx.execute(
                "INSERT INTO conversations (id, tenant, body, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                conversation["id"],
                t,
                _dump(conversation),
                int(conversation["created_at"]),
                now + self.ttl_seconds,
            )
            await self._insert_items(tx, t, "conversation", conversation["id"], 0, items)

    async def get_conversation(self, tenant: str | None, conversation_id: str) -> JSON | None:
        async with self.transaction("get_conversation") as tx:
            rows = await tx.fetch(
                "SELECT body FROM conversations WHERE id = ? AND tenant = ? AND expires_at > ?",
                conversation_id,
                _tenant(tenant),
                self._now(),
            )
        return json.loads(rows[0][0]) if rows else None

    async def update_conversation(
        self, tenant: str | None, conversation_id: str, metadata: dict[str, str]
    ) -> JSON | None:
        async with self.transaction("update_conversation") as tx:
            rows = await tx.fetch(
                "SELECT body FROM conversations WHERE id = ? AND tenant = ? AND expires_at > ?"
                f"{self.for_update}",
                conversation_id,
                _tenant(tenant),
                self._now(),
            )
            if not rows:
                return None
            conversation: JSON = json.loads(rows[0][0])
            conversation["metadata"] = metadata
            await tx.execute(
                "UPDATE conversations SET body = ?, expires_at = ? WHERE id = ?",
                _dump(conversation),
                self._now() + self.ttl_seconds,
                conversation_id,
            )
        return conversation

    async def delete_conversation(self, tenant: str | None, conversation_id: str) -> bool:
        async with self.transaction("delete_conversation") as tx:
            deleted = await tx.execute(
                "DELETE FROM conversations WHERE id = ? AND tenant = ? AND expires_at > ?",
                conversation_id,
                _tenant(tenant),
                self._now(),
            )
            if deleted:
                await tx.execute(
                    "DELETE FROM items WHERE owner_id = ? AND owner = 'conversation'",
                    conversation_id,
                )
        return deleted > 0

    async def add_conversation_items(
        self, tenant: str | None, conversation_id: str, items: list[JSON]
    ) -> bool:
        async with self.transaction("add_conversation_items") as tx:
            return await self._append(tx, _tenant(tenant), conversation_id, items)

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

    async def conversation_items(self, tenant: str | None, conversation_id: str) -> list[JSON]:
        async with self.transaction("conversation_items") as tx:
            rows = await tx.fetch(
                "SELECT body FROM items WHERE owner_id = ? AND owner = 'conversation' "
                "AND tenant = ? ORDER BY position",
                conversation_id,
                _tenant(tenant),
            )
        return [json.loads(row[0]) for row in rows]

    async def get_conversation_item(
        self, tenant: str | None, conversation_id: str, item_id: str
    ) -> JSON | None:
        async with self.transaction("get_conversation_item") as tx:
            if not await self._owned(tx, "conversations", tenant, conversation_id):
                return None
            rows = await tx.fetch(
                "SELECT body FROM items WHERE owner_id = ? AND owner = 'conversation' "
                "AND item_id = ?",
                conversation_id,
                item_id,
            )
        return json.loads(rows[0][0]) if rows else None

    async def delete_conversation_item(
        self, tenant: str | None, conversation_id: str, item_id: str
    ) -> bool:
        async with self.transaction("delete_conversation_item") as tx:
            if not await self._owned(tx, "conversations", tenant, conversation_id):
                return False
            deleted = await tx.execute(
                "DELETE FROM items WHERE owner_id = ? AND owner = 'conversation' AND item_id = ?",
                conversation_id,
                item_id,
            )
        return deleted > 0

    # ------------------------------------------------------------ housekeeping

    async def purge_expired(self) -> int:
        now = self._now()
        async with self.transaction("purge_expired") as tx:
            expired = "SELECT id FROM responses WHERE expires_at <= ?"
            await tx.execute(f"DELETE FROM response_events WHERE response_id IN ({expired})", now)
            await tx.execute(
                f"DELETE FROM items WHERE owner IN ('input', 'output') AND owner_id IN ({expired})",
                now,
            )
            count = await tx.execute("DELETE FROM responses WHERE expires_at <= ?", now)
            await tx.execute(
                "DELETE FROM items WHERE owner = 'conversation' AND owner_id IN "
                "(SELECT id FROM conversations WHERE expires_at <= ?)",
                now,
            )
            count += await tx.execute("DELETE FROM conversations WHERE expires_at <= ?", now)
            # Processes long gone (each start is a new runner).
            await tx.execute("DELETE FROM runners WHERE seen_at <= ?", now - self.ttl_seconds)
        return count
