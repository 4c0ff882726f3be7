"""Code interpreter containers and their files' metadata, in the SQL store's database.

A container's files live on the disk of the replica that made it (its `replica`); every
replica reads the rows here. Kept as wire JSON like everything else; `status` is not
stored: a container is "running" until `expires_at` (last activity plus its
expires_after minutes), then "expired" until the sweep deletes it. Every read and write
names the tenant, and another tenant's container is missing.
"""

from __future__ import annotations

import json
from typing import Any

from respond.store._sql import _dump, _tenant
from respond.store.base import JSON, ListQuery, Page
from respond.store.files import paged
from respond.store.sql import SQLStore

__all__ = ["ContainerStore", "Held"]

Held = tuple[JSON, str]  # a container (status included) and the replica that holds it


class ContainerStore:
    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql

    # ------------------------------------------------------------ containers

    async def create(self, tenant: str | None, replica: str, container: JSON) -> None:
        async with self.sql.transaction("create_container") as tx:
            await tx.execute(
                "INSERT INTO containers (id, tenant, name, replica, body, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                container["id"],
                _tenant(tenant),
                container["name"],
                replica,
                _dump(container),
                container["created_at"],
                _expires_at(container),
            )

    async def get(self, tenant: str | None, container_id: str) -> Held | None:
        async with self.sql.transaction("get_container", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body, replica, expires_at FROM containers WHERE id = ? AND tenant = ?",
                container_id,
                _tenant(tenant),
            )
        if not rows:
            return None
        body, replica, expires_at = rows[0]
        return self._status(json.loads(body), int(expires_at)), str(replica)

    async def list_containers(self, tenant: str | None, name: str | None, query: ListQuery) -> Page:
        where, args = "tenant = ?", [_tenant(tenant)]
        if name is not None:
            where, args = f"{where} AND name = ?", [*args, name]
        async with self.sql.transaction("list_containers", readonly=True) as tx:
            page = await paged(tx, "containers", "id", where, args, query)
        data = [self._status(c, _expires_at(c)) for c in page.data]
        return Page(data=data, has_more=page.has_more)

    async def touch(self, tenant: str | None, container_id: str, now: int) -> bool:
        """The container was used: its expiry restarts from now. False: missing or expired."""
        async with self.sql.transaction("touch_container") as tx:
            rows = await tx.fetch(
                "SELECT body FROM containers WHERE id = ? AND tenant = ? AND expires_at > ?"
                f"{self.sql.for_update}",
                container_id,
                _tenant(tenant),
                now,
            )
            if not rows:
                return False
            container = {**json.loads(rows[0][0]), "last_active_at": now}
            await tx.execute(
                "UPDATE containers SET body = ?, expires_at = ? WHERE id = ?",
                _dump(container),
                _expires_at(container),
                container_id,
            )
        return True

    async def delete(self, tenant: str | None, container_id: str) -> bool:
        async with self.sql.transaction("delete_container") as tx:
            deleted = await tx.execute(
                "DELETE FROM containers WHERE id = ? AND tenant = ?",
                container_id,
                _tenant(tenant),
            )
            if deleted:
                await tx.execute("DELETE FROM container_files WHERE container_id = ?", container_id)
        return deleted > 0

    async def purge_expired(self) -> int:
        """Delete expired containers and their files' rows (every replica's: the disk of
        each is swept by its own replica, `live_ids`). How many containers went."""
        expired = "SELECT id FROM containers WHERE expires_at <= ?"
        async with self.sql.transaction("purge_expired_containers") as tx:
            now = self.sql._now()
            await tx.execute(f"DELETE FROM container_files WHERE container_id IN ({expired})", now)
            return await tx.execute("DELETE FROM containers WHERE expires_at <= ?", now)

    async def live_ids(self, replica: str) -> set[str]:
        """The containers this replica holds (whose folders it keeps)."""
        async with self.sql.transaction("live_containers", readonly=True) as tx:
            rows = await tx.fetch("SELECT id FROM containers WHERE replica = ?", replica)
        return {str(row[0]) for row in rows}

    def _status(self, container: JSON, expires_at: int) -> JSON:
        expired = expires_at <= self.sql._now()
        return {**container, "status": "expired" if expired else "running"}

    # ------------------------------------------------------------ their files

    async def files(self, container_id: str) -> list[JSON]:
        """Every file of a container (its holder compares them with its disk)."""
        async with self.sql.transaction("container_files", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body FROM container_files WHERE container_id = ?", container_id
            )
        return [json.loads(row[0]) for row in rows]

    async def put_file(self, tenant: str | None, file: JSON) -> None:
        """Add a file, or replace the one at its path."""
        async with self.sql.transaction("put_container_file") as tx:
            await tx.execute(
                "DELETE FROM container_files WHERE container_id = ? AND path = ?",
                file["container_id"],
                file["path"],
            )
            await tx.execute(
                "INSERT INTO container_files (id, container_id, tenant, path, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                file["id"],
                file["container_id"],
                _tenant(tenant),
                file["path"],
                _dump(file),
                file["created_at"],
            )

    async def sync_files(
        self, tenant: str | None, container_id: str, put: list[JSON], gone: list[str]
    ) -> None:
        """After a call: the files it wrote (new or changed) and the ids of those it
        removed, in one transaction."""
        async with self.sql.transaction("sync_container_files") as tx:
            for file_id in gone:
                await tx.execute("DELETE FROM container_files WHERE id = ?", file_id)
            for file in put:
                await tx.execute(
                    "DELETE FROM container_files WHERE container_id = ? AND path = ?",
                    container_id,
                    file["path"],
                )
                await tx.execute(
                    "INSERT INTO container_files (id, container_id, tenant, path, body, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    file["id"],
                    container_id,
                    _tenant(tenant),
                    file["path"],
                    _dump(file),
                    file["created_at"],
                )

    async def get_file(self, tenant: str | None, container_id: str, file_id: str) -> JSON | None:
        async with self.sql.transaction("get_container_file", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT body FROM container_files WHERE id = ? AND container_id = ? AND tenant = ?",
                file_id,
                container_id,
                _tenant(tenant),
            )
        return json.loads(rows[0][0]) if rows else None

    async def list_files(self, tenant: str | None, container_id: str, query: ListQuery) -> Page:
        where, args = "container_id = ? AND tenant = ?", [container_id, _tenant(tenant)]
        async with self.sql.transaction("list_container_files", readonly=True) as tx:
            return await paged(tx, "container_files", "id", where, args, query)

    async def delete_file(self, tenant: str | None, container_id: str, file_id: str) -> bool:
        async with self.sql.transaction("delete_container_file") as tx:
            deleted = await tx.execute(
                "DELETE FROM container_files WHERE id = ? AND container_id = ? AND tenant = ?",
                file_id,
                container_id,
                _tenant(tenant),
            )
        return deleted > 0


def _expires_at(container: JSON) -> int:
    after: dict[str, Any] = container["expires_after"]
    return int(container["last_active_at"]) + int(after["minutes"]) * 60
