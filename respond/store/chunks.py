"""Indexing and searching the chunks of vector store files, in the SQL store's database.

Indexing state lives in `vector_store_files`, so it survives restarts and is shared by
replicas: a process claims an `in_progress` file (`claim`), indexes it, and stores its
chunks (`finish`) or its error (`fail`). A claim held by a process that stopped
heartbeating (any other process, for SQLite's single owner) is taken over; after
`MAX_ATTEMPTS` claims the file is failed instead, so nothing stays `in_progress`.

Lexical search is the database's own full-text index: FTS5 `bm25` in SQLite, a
`tsvector` column ranked by `ts_rank_cd` in PostgreSQL. Both match any query term.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from respond.store._sql import _dump
from respond.store.base import JSON
from respond.store.sql import SQLStore, Tx

__all__ = ["MAX_ATTEMPTS", "Chunk", "ChunkStore", "Claim", "drop_chunks", "query_terms"]

MAX_ATTEMPTS = 3
MAX_TERMS = 64


@dataclass(frozen=True)
class Claim:
    """A file this process now indexes."""

    tenant: str | None
    store_id: str
    entry: JSON  # the vector store file
    filename: str
    content: bytes


@dataclass(frozen=True)
class Chunk:
    store_id: str
    file_id: str
    position: int
    text: str
    score: float = 0.0
    embedding: bytes | None = None


async def drop_chunks(tx: Tx, dialect: str, where: str, args: list[Any]) -> None:
    """Delete the chunks matching `where` (and, in SQLite, their full-text rows)."""
    if dialect == "sqlite":
        await tx.execute(
            f"DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE {where})", *args
        )
    await tx.execute(f"DELETE FROM chunks WHERE {where}", *args)


def query_terms(query: str) -> list[str]:
    """The words of a query, lowercased, once each: what the full-text index is asked for."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[^\W_]+", query.lower()):
        seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


class ChunkStore:
    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql

    # ------------------------------------------------------------ indexing

    async def claim(self, runner: str, stale_after: int) -> Claim | None:
        """The oldest file waiting to be indexed, now claimed by `runner` (None: none)."""
        alive_since = self.sql._now() + 1 if self.sql.exclusive else self.sql._now() - stale_after
        async with self.sql.transaction("claim_file") as tx:
            while True:
                rows = await tx.fetch(
                    "SELECT f.vector_store_id, f.file_id, f.tenant, f.attempts, f.body, "
                    "f.claimed_by FROM vector_store_files f "
                    "LEFT JOIN runners w ON w.id = f.claimed_by WHERE f.status = 'in_progress' "
                    "AND (f.claimed_by IS NULL OR (f.claimed_by <> ? AND "
                    "(w.seen_at IS NULL OR w.seen_at < ?))) ORDER BY f.created_at LIMIT 1"
                    # Replicas claim side by side: each skips rows another is claiming.
                    f"{' FOR UPDATE OF f SKIP LOCKED' if self.sql.dialect == 'postgres' else ''}",
                    runner,
                    alive_since,
                )
                if not rows:
                    return None
                store_id, file_id, tenant, attempts, body, _ = rows[0]
                entry: JSON = json.loads(body)
                if int(attempts) >= MAX_ATTEMPTS:
                    error = {
                        "code": "server_error",
                        "message": f"Indexing was interrupted {attempts} times; giving up.",
                    }
                    await self._end(
                        tx, store_id, {**entry, "status": "failed", "last_error": error}
                    )
                    continue
                files = await tx.fetch("SELECT body, content FROM files WHERE id = ?", file_id)
                if not files:  # deleted meanwhile (deleting detaches it too)
                    error = {"code": "file_not_found", "message": "The file was deleted."}
                    await self._end(
                        tx, store_id, {**entry, "status": "failed", "last_error": error}
                    )
                    continue
                await tx.execute(
                    "UPDATE vector_store_files SET claimed_by = ?, claimed_at = ?, "
                    "attempts = attempts + 1 WHERE vector_store_id = ? AND file_id = ?",
                    runner,
                    self.sql._now(),
                    store_id,
                    file_id,
                )
                file = json.loads(files[0][0])
                return Claim(tenant or None, store_id, entry, file["filename"], bytes(files[0][1]))

    async def finish(self, runner: str, claim: Claim, chunks: list[Chunk]) -> bool:
        """Store the file's chunks and complete it; False when it was detached, cancelled
        or taken over meanwhile (nothing is stored)."""
        store_id, file_id = claim.store_id, claim.entry["id"]
        async with self.sql.transaction("finish_file") as tx:
            if not await self._still_mine(tx, runner, store_id, file_id):
                return False
            where = "vector_store_id = ? AND file_id = ?"
            await drop_chunks(tx, self.sql.dialect, where, [store_id, file_id])
            if chunks:
                await tx.executemany(
                    "INSERT INTO chunks (vector_store_id, file_id, position, text, embedding) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(store_id, file_id, c.position, c.text, c.embedding) for c in chunks],
                )
                if self.sql.dialect == "sqlite":
                    await tx.execute(
                        f"INSERT INTO chunks_fts (rowid, text) SELECT id, text FROM chunks "
                        f"WHERE {where}",
                        store_id,
                        file_id,
                    )
            usage = sum(len(c.text.encode()) for c in chunks)
            entry = {**claim.entry, "status": "completed", "usage_bytes": usage}
            await self._end(tx, store_id, entry)
        return True

    async def fail(self, runner: str, claim: Claim, code: str, message: str) -> None:
        async with self.sql.transaction("fail_file") as tx:
            if await self._still_mine(tx, runner, claim.store_id, claim.entry["id"]):
                error = {"code": code, "message": message}
                await self._end(
                    tx, claim.store_id, {**claim.entry, "status": "failed", "last_error": error}
                )

    async def _still_mine(self, tx: Tx, runner: str, store_id: str, file_id: str) -> bool:
        rows = await tx.fetch(
            "SELECT claimed_by FROM vector_store_files WHERE vector_store_id = ? AND file_id = ? "
            f"AND status = 'in_progress'{self.sql.for_update}",
            store_id,
            file_id,
        )
        return bool(rows) and rows[0][0] == runner

    async def _end(self, tx: Tx, store_id: str, entry: JSON) -> None:
        await tx.execute(
            "UPDATE vector_store_files SET status = ?, body = ?, usage_bytes = ?, "
            "claimed_by = NULL WHERE vector_store_id = ? AND file_id = ?",
            entry["status"],
            _dump(entry),
            int(entry.get("usage_bytes") or 0),
            store_id,
            entry["id"],
        )

    # ------------------------------------------------------------ reading and searching

    async def file_chunks(self, store_id: str, file_id: str) -> list[str]:
        async with self.sql.transaction("file_chunks", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT text FROM chunks WHERE vector_store_id = ? AND file_id = ? "
                "ORDER BY position",
                store_id,
                file_id,
            )
        return [row[0] for row in rows]

    async def lexical(
        self, scope: list[tuple[str, str]], terms: list[str], limit: int
    ) -> list[Chunk]:
        """The best `limit` chunks of the (store id, file id) pairs in `scope` for any of
        `terms`, best first; `score` is the database's rank (higher is better)."""
        if not scope or not terms:
            return []
        inside, args = _scope_sql(scope)
        if self.sql.dialect == "sqlite":
            match = " OR ".join(f'"{term}"' for term in terms)
            sql = (
                "SELECT c.vector_store_id, c.file_id, c.position, c.text, -bm25(chunks_fts) "
                "FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
                f"WHERE chunks_fts MATCH ? AND {inside} ORDER BY bm25(chunks_fts) LIMIT ?"
            )
        else:
            match = " | ".join(terms)
            sql = (
                "SELECT c.vector_store_id, c.file_id, c.position, c.text, ts_rank_cd(c.tsv, q) "
                "AS score FROM chunks c, to_tsquery('english', ?) q "
                f"WHERE c.tsv @@ q AND {inside} ORDER BY score DESC, c.id LIMIT ?"
            )
        async with self.sql.transaction("search_lexical", readonly=True) as tx:
            rows = await tx.fetch(sql, match, *args, limit)
        return [Chunk(r[0], r[1], int(r[2]), r[3], float(r[4])) for r in rows]

    async def embedded(self, scope: list[tuple[str, str]]) -> list[Chunk]:
        """Every chunk with a vector in `scope` (exact vector search reads them all)."""
        if not scope:
            return []
        inside, args = _scope_sql(scope)
        async with self.sql.transaction("search_vectors", readonly=True) as tx:
            rows = await tx.fetch(
                "SELECT c.vector_store_id, c.file_id, c.position, c.text, c.embedding "
                f"FROM chunks c WHERE c.embedding IS NOT NULL AND {inside}",
                *args,
            )
        return [Chunk(r[0], r[1], int(r[2]), r[3], embedding=bytes(r[4])) for r in rows]


def _scope_sql(scope: list[tuple[str, str]]) -> tuple[str, list[str]]:
    pairs = " OR ".join("(c.vector_store_id = ? AND c.file_id = ?)" for _ in scope)
    return f"({pairs})", [value for pair in scope for value in pair]
