"""Conversations and their items, in SQL."""

from __future__ import annotations

import json

from respond.store._sql import SQLBase, _dump, _tenant
from respond.store.base import JSON

__all__ = ["ConversationsSQL"]


class ConversationsSQL(SQLBase):
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
        async with self.transaction("get_conversation", readonly=True) as tx:
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

    async def conversation_items(self, tenant: str | None, conversation_id: str) -> list[JSON]:
        async with self.transaction("conversation_items", readonly=True) as tx:
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
        async with self.transaction("get_conversation_item", readonly=True) as tx:
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
