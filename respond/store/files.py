"""Files, vector stores, the files in them and file batches, in the SQL store's database.

Kept as wire JSON like everything else; what a query filters or counts on (tenant,
purpose, status, bytes) also has a column. Every read and write names the tenant, and
another tenant's object is missing. A vector store's `file_counts`, `usage_bytes` and
`status` are not stored: they are counted from its files when it is read.
"""

from __future__ import annotations

import json
from typing import Any

from respond.store._sql import _dump, _tenant
from respond.store.base import JSON, ListQuery, Page, UnknownCursorError
from respond.store.chunks import drop_chunks
from respond.store.sql import SQLStore, Tx

__all__ = ["FileStore", "paged"]

_STATUSES = ("in_progress", "completed", "failed", "cancelled")
_DAY = 24 * 3600


class FileStore:
    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql

    # ------------------------------------------------------------ files

    async def create_file(self, tenant: str | None, file: JSON, content: bytes) -> None:
        async with self.sql.transaction("create_file") as tx:
            await tx.execute(
                "INSERT INTO files (id, tenant, purpose, body, content, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                file["id"],
                _tenant(tenant),
                file["purpose"],
                _dump(file),
                content,
                file["created_at"],
                file.get("expires_at"),
            )

    async def get_file(self, tenant: str | None, file_id: str) -> JSON | None:
        async with self.sql.transaction("get_file", readonly=True) as tx:
            rows = await tx.fetch(
                f"SELECT body FROM files WHERE id = ? AND tenant = ?{self._live()}",
                file_id,
                _tenant(tenant),
                self.sql._now(),
            )
        return json.loads(rows[0][0]) if rows else None

    async def file_content(self, tenant: str | None, file_id: str) -> tuple[JSON, bytes] | None:
        async with self.sql.transaction("file_content", readonly=True) as tx:
            rows = await tx.fetch(
                f"SELECT body, content FROM files WHERE id = ? AND tenant = ?{self._live()}",
                file_id,
                _tenant(tenant),
                self.sql._now(),
            )
        return (json.loads(rows[0][0]), bytes(rows[0][1])) if rows else None

    @staticmethod
    def _live() -> str:
        return " AND (expires_at IS NULL OR expires_at > ?)"

    async def list_files(self, tenant: str | None, purpose: str | None, query: ListQuery) -> Page:
        where, args = f"tenant = ?{self._live()}", [_tenant(tenant), self.sql._now()]
        if purpose is not None:
            where, args = f"{where} AND purpose = ?", [*args, purpose]
        async with self.sql.transaction("list_files", readonly=True) as tx:
            return await paged(tx, "files", "id", where, args, query)

    async def delete_file(self, tenant: str | None, file_id: str) -> bool:
        """Delete a file; it leaves every vector store it was in (chunks included)."""
        async with self.sql.transaction("delete_file") as tx:
            deleted = await tx.execute(
                "DELETE FROM files WHERE id = ? AND tenant = ?", file_id, _tenant(tenant)
            )
            if deleted:
                await drop_chunks(tx, self.sql.dialect, "file_id = ?", [file_id])
                await tx.execute("DELETE FROM vector_store_files WHERE file_id = ?", file_id)
        return deleted > 0

    async def purge_expired(self) -> int:
        """Delete the files whose `expires_at` has passed (hidden since): their bytes, and
        their chunks in every vector store. How many files went."""
        expired = "SELECT id FROM files WHERE expires_at <= ?"
        async with self.sql.transaction("purge_expired_files") as tx:
            now = self.sql._now()
            await drop_chunks(tx, self.sql.dialect, f"file_id IN ({expired})", [now])
            await tx.execute(f"DELETE FROM vector_store_files WHERE file_id IN ({expired})", now)
            return await tx.execute("DELETE FROM files WHERE expires_at <= ?", now)

    # ------------------------------------------------------------ vector stores

    async def create_vector_store(self, tenant: str | None, store: JSON) -> None:
        async with self.sql.transaction("create_vector_store") as tx:
            await tx.execute(
                "INSERT INTO vector_stores (id, tenant, body, created_at) VALUES (?, ?, ?, ?)",
                store["id"],
                _tenant(tenant),
                _dump(store),
                store["created_at"],
            )

    async def get_vector_store(self, tenant: str | None, store_id: str) -> JSON | None:
        async with self.sql.transaction("get_vector_store", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body FROM vector_stores WHERE id = ? AND tenant = ?",
                store_id,
                _tenant(tenant),
            )
            if not rows:
                return None
            return await self._counted(tx, json.loads(rows[0][0]))

    async def list_vector_stores(self, tenant: str | None, query: ListQuery) -> Page:
        async with self.sql.transaction("list_vector_stores", readonly=True) as tx:
            page = await paged(tx, "vector_stores", "id", "tenant = ?", [_tenant(tenant)], query)
            page.data[:] = [await self._counted(tx, store) for store in page.data]
        return page

    async def update_vector_store(
        self, tenant: str | None, store_id: str, changes: dict[str, Any]
    ) -> JSON | None:
        """Set the given fields (name, metadata, expires_after, last_active_at)."""
        async with self.sql.transaction("update_vector_store") as tx:
            rows = await tx.fetch(
                f"SELECT body FROM vector_stores WHERE id = ? AND tenant = ?{self.sql.for_update}",
                store_id,
                _tenant(tenant),
            )
            if not rows:
                return None
            store: JSON = {**json.loads(rows[0][0]), **changes}
            await tx.execute(
                "UPDATE vector_stores SET body = ? WHERE id = ?", _dump(store), store_id
            )
            return await self._counted(tx, store)

    async def delete_vector_store(self, tenant: str | None, store_id: str) -> bool:
        async with self.sql.transaction("delete_vector_store") as tx:
            deleted = await tx.execute(
                "DELETE FROM vector_stores WHERE id = ? AND tenant = ?", store_id, _tenant(tenant)
            )
            if deleted:
                await drop_chunks(tx, self.sql.dialect, "vector_store_id = ?", [store_id])
                for table in ("vector_store_files", "file_batches"):
                    await tx.execute(f"DELETE FROM {table} WHERE vector_store_id = ?", store_id)
        return deleted > 0

    async def _counted(self, tx: Tx, store: JSON) -> JSON:
        """The stored vector store with what is counted from its files."""
        rows = await tx.fetch(
            "SELECT status, COUNT(*), SUM(usage_bytes) FROM vector_store_files "
            "WHERE vector_store_id = ? GROUP BY status",
            store["id"],
        )
        counts = dict.fromkeys(_STATUSES, 0)
        usage = 0
        for status, count, used in rows:
            counts[status] = int(count)
            usage += int(used or 0)
        expires_at = None
        if store.get("expires_after"):
            expires_at = int(store["last_active_at"]) + store["expires_after"]["days"] * _DAY
        if expires_at is not None and expires_at <= self.sql._now():
            status = "expired"
        else:
            status = "in_progress" if counts["in_progress"] else "completed"
        return {
            **store,
            "usage_bytes": usage,
            "file_counts": {**counts, "total": sum(counts.values())},
            "status": status,
            "expires_at": expires_at,
        }

    # ------------------------------------------------------------ the files of a store

    async def attach(
        self, tenant: str | None, store_id: str, entry: JSON, batch_id: str | None = None
    ) -> bool:
        """Put a file (`entry`: the vector store file, in_progress) in a vector store, to be
        indexed. Attaching it again indexes it again. False: no such store or file."""
        t = _tenant(tenant)
        async with self.sql.transaction("attach_file") as tx:
            owned = await tx.fetch(
                "SELECT (SELECT COUNT(*) FROM vector_stores WHERE id = ? AND tenant = ?), "
                f"(SELECT COUNT(*) FROM files WHERE id = ? AND tenant = ?{self._live()})",
                store_id,
                t,
                entry["id"],
                t,
                self.sql._now(),
            )
            if not (owned[0][0] and owned[0][1]):
                return False
            await drop_chunks(
                tx,
                self.sql.dialect,
                "vector_store_id = ? AND file_id = ?",
                [store_id, entry["id"]],
            )
            await tx.execute(
                "DELETE FROM vector_store_files WHERE vector_store_id = ? AND file_id = ?",
                store_id,
                entry["id"],
            )
            await tx.execute(
                "INSERT INTO vector_store_files (vector_store_id, file_id, tenant, status, "
                "batch_id, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                store_id,
                entry["id"],
                t,
                entry["status"],
                batch_id,
                _dump(entry),
                entry["created_at"],
            )
        return True

    async def get_store_file(self, tenant: str | None, store_id: str, file_id: str) -> JSON | None:
        async with self.sql.transaction("get_vector_store_file", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body FROM vector_store_files WHERE vector_store_id = ? AND file_id = ? "
                "AND tenant = ?",
                store_id,
                file_id,
                _tenant(tenant),
            )
        return json.loads(rows[0][0]) if rows else None

    async def list_store_files(
        self,
        tenant: str | None,
        store_id: str,
        query: ListQuery,
        *,
        status: str | None = None,
        batch_id: str | None = None,
    ) -> Page:
        where, args = "vector_store_id = ? AND tenant = ?", [store_id, _tenant(tenant)]
        for column, value in (("status", status), ("batch_id", batch_id)):
            if value is not None:
                where, args = f"{where} AND {column} = ?", [*args, value]
        async with self.sql.transaction("list_vector_store_files", readonly=True) as tx:
            return await paged(tx, "vector_store_files", "file_id", where, args, query)

    async def all_store_files(
        self, tenant: str | None, store_ids: list[str]
    ) -> list[tuple[JSON, str]]:
        """Every file of these vector stores, with its file name (a search filters on
        their attributes and names the files it found)."""
        if not store_ids:
            return []
        marks = ", ".join("?" for _ in store_ids)
        async with self.sql.transaction("all_vector_store_files", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT v.body, f.body FROM vector_store_files v JOIN files f ON f.id = v.file_id "
                f"WHERE v.vector_store_id IN ({marks}) AND v.tenant = ?",
                *store_ids,
                _tenant(tenant),
            )
        return [(json.loads(row[0]), json.loads(row[1])["filename"]) for row in rows]

    async def update_store_file(
        self, tenant: str | None, store_id: str, file_id: str, changes: dict[str, Any]
    ) -> JSON | None:
        async with self.sql.transaction("update_vector_store_file") as tx:
            rows = await tx.fetch(
                "SELECT body FROM vector_store_files WHERE vector_store_id = ? AND file_id = ? "
                f"AND tenant = ?{self.sql.for_update}",
                store_id,
                file_id,
                _tenant(tenant),
            )
            if not rows:
                return None
            entry: JSON = {**json.loads(rows[0][0]), **changes}
            await tx.execute(
                "UPDATE vector_store_files SET body = ?, status = ? "
                "WHERE vector_store_id = ? AND file_id = ?",
                _dump(entry),
                entry["status"],
                store_id,
                file_id,
            )
        return entry

    async def detach(self, tenant: str | None, store_id: str, file_id: str) -> bool:
        """Take a file out of a vector store (the file itself stays)."""
        async with self.sql.transaction("detach_file") as tx:
            deleted = await tx.execute(
                "DELETE FROM vector_store_files WHERE vector_store_id = ? AND file_id = ? "
                "AND tenant = ?",
                store_id,
                file_id,
                _tenant(tenant),
            )
            if deleted:
                await drop_chunks(
                    tx, self.sql.dialect, "vector_store_id = ? AND file_id = ?", [store_id, file_id]
                )
        return deleted > 0

    # ------------------------------------------------------------ file batches

    async def create_batch(self, tenant: str | None, batch: JSON) -> None:
        async with self.sql.transaction("create_file_batch") as tx:
            await tx.execute(
                "INSERT INTO file_batches (id, vector_store_id, tenant, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                batch["id"],
                batch["vector_store_id"],
                _tenant(tenant),
                _dump(batch),
                batch["created_at"],
            )

    async def get_batch(self, tenant: str | None, store_id: str, batch_id: str) -> JSON | None:
        """The batch with its file counts and status as of now."""
        async with self.sql.transaction("get_file_batch", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body FROM file_batches WHERE id = ? AND vector_store_id = ? AND tenant = ?",
                batch_id,
                store_id,
                _tenant(tenant),
            )
            if not rows:
                return None
            batch: JSON = json.loads(rows[0][0])
            counted = await tx.fetch(
                "SELECT status, COUNT(*) FROM vector_store_files WHERE batch_id = ? "
                "GROUP BY status",
                batch_id,
            )
        counts = dict.fromkeys(_STATUSES, 0)
        for status, count in counted:
            counts[status] = int(count)
        if batch["status"] != "cancelled":
            batch["status"] = "in_progress" if counts["in_progress"] else "completed"
        return {**batch, "file_counts": {**counts, "total": sum(counts.values())}}

    async def cancel_batch(self, tenant: str | None, store_id: str, batch_id: str) -> bool:
        """Cancel the batch's files not indexed yet (a file being indexed ends cancelled)."""
        async with self.sql.transaction("cancel_file_batch") as tx:
            rows = await tx.fetch(
                "SELECT body FROM file_batches WHERE id = ? AND vector_store_id = ? "
                f"AND tenant = ?{self.sql.for_update}",
                batch_id,
                store_id,
                _tenant(tenant),
            )
            if not rows:
                return False
            batch = {**json.loads(rows[0][0]), "status": "cancelled"}
            await tx.execute(
                "UPDATE file_batches SET body = ? WHERE id = ?", _dump(batch), batch_id
            )
            pending = await tx.fetch(
                "SELECT file_id, body FROM vector_store_files WHERE batch_id = ? "
                "AND status = 'in_progress'",
                batch_id,
            )
            for file_id, body in pending:
                entry = {**json.loads(body), "status": "cancelled"}
                await tx.execute(
                    "UPDATE vector_store_files SET status = 'cancelled', body = ? "
                    "WHERE vector_store_id = ? AND file_id = ?",
                    _dump(entry),
                    store_id,
                    file_id,
                )
        return True


async def paged(
    tx: Tx, table: str, key: str, where: str, args: list[Any], query: ListQuery
) -> Page:
    """A page of `table` in creation order; `after` / `before` name a `key`."""
    for name, cursor in (("after", query.after), ("before", query.before)):
        if cursor is None:
            continue
        rows = await tx.fetch(
            f"SELECT created_at FROM {table} WHERE {where} AND {key} = ?", *args, cursor
        )
        if not rows:
            raise UnknownCursorError(name, cursor)
        op = ">" if (name == "after") == (query.order == "asc") else "<"
        where += f" AND (created_at {op} ? OR (created_at = ? AND {key} {op} ?))"
        args = [*args, rows[0][0], rows[0][0], cursor]
    direction = "ASC" if query.order == "asc" else "DESC"
    rows = await tx.fetch(
        f"SELECT body FROM {table} WHERE {where} "
        f"ORDER BY created_at {direction}, {key} {direction} LIMIT ?",
        *args,
        query.limit + 1,
    )
    data = [json.loads(row[0]) for row in rows]
    return Page(data=data[: query.limit], has_more=len(data) > query.limit)
