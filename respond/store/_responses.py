"""Responses: each with its input and output items and its stream events, in SQL."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from respond.store._sql import SQLBase, Tx, _dump, _tenant
from respond.store.base import JSON, ItemOwner, ListQuery, Page, StoredResponse, UnknownCursorError

__all__ = ["ResponsesSQL"]


class ResponsesSQL(SQLBase):
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

    async def get_response(self, tenant: str | None, response_id: str) -> StoredResponse | None:
        async with self.transaction("get_response", readonly=True) as tx:
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

    async def cancels_requested(self, response_ids: Collection[str]) -> list[str]:
        if not response_ids:
            return []
        marks = ", ".join("?" for _ in response_ids)
        async with self.transaction("cancels_requested", readonly=True) as tx:
            rows = await tx.fetch(
                f"SELECT id FROM responses WHERE cancel_requested = 1 AND id IN ({marks})",
                *response_ids,
            )
        return [row[0] for row in rows]

    async def events_after(
        self, tenant: str | None, response_id: str, after: int
    ) -> list[JSON] | None:
        async with self.transaction("events_after", readonly=True) as tx:
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
        async with self.transaction("list_items", readonly=True) as tx:
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
        async with self.transaction("find_item", readonly=True) as tx:
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
