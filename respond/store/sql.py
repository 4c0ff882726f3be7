"""The store in SQL: one room per thing it keeps, composed here.

- `_sql.py`: transactions (the contract both databases keep), migrations, shared helpers;
- `_responses.py`: responses, their items and stream events;
- `_queue.py`: the background queue (heartbeats, claims, starts, hand-backs, ends);
- `_conversations.py`: conversations and their items;
- `files.py` and `chunks.py`: files, vector stores and their chunks (beside the store).

SQLite and PostgreSQL (`sqlite.py`, `postgres.py`) supply how a statement runs.
"""

from __future__ import annotations

from respond.store._conversations import ConversationsSQL
from respond.store._queue import QueueSQL
from respond.store._responses import ResponsesSQL
from respond.store._sql import Tx, migrations

__all__ = ["SQLStore", "Tx", "migrations"]


class SQLStore(ResponsesSQL, QueueSQL, ConversationsSQL):
    """The whole store in SQL: each room's operations, and the purge that crosses them."""

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
