"""The background queue in SQL: runners' heartbeats, claims, starts, hand-backs and ends."""

from __future__ import annotations

import json

from respond.store._sql import UNFINISHED, SQLBase, _dump, _tenant
from respond.store.base import JSON

__all__ = ["QueueSQL"]


class QueueSQL(SQLBase):
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
        async with self.transaction("orphans", readonly=True) as tx:
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

    async def hand_back(
        self, runner: str, tenant: str | None, response_id: str, queued: JSON, keep: int
    ) -> bool:
        async with self.transaction("hand_back") as tx:
            changed = await tx.execute(
                "UPDATE responses SET status = 'queued', body = ?, runner = NULL "
                "WHERE id = ? AND tenant = ? AND runner = ? AND status IN (?, ?) "
                "AND request IS NOT NULL",
                _dump(queued),
                response_id,
                _tenant(tenant),
                runner,
                *UNFINISHED,
            )
            if changed:
                await tx.execute(
                    "DELETE FROM response_events WHERE response_id = ? AND seq >= ?",
                    response_id,
                    keep,
                )
        return changed > 0

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
