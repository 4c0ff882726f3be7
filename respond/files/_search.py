"""Searching vector stores: attribute filters, lexical and vector ranking, fusion.

Lexical ranking is the database's full-text index; with an embedding model, chunks are
also ranked by exact cosine similarity over their stored vectors, and the two rankings
(of every query) are fused by reciprocal rank fusion. Scores are in [0, 1]:
- lexical only: s / (1 + s) of the database's rank s;
- vector only: (1 + cosine) / 2;
- fused: the RRF sum over the rankings, divided by its best possible value (first in all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from respond.files._embedding import Embedder, unpack
from respond.files._filters import matches
from respond.protocol.files import Filter
from respond.store.base import JSON
from respond.store.chunks import Chunk, ChunkStore, query_terms
from respond.store.files import FileStore

__all__ = ["RRF_K", "Hit", "Retriever"]

RRF_K = 60  # the constant of Cormack et al.'s reciprocal rank fusion
CANDIDATES = 50  # taken from each ranking before fusion


@dataclass(frozen=True)
class Hit:
    store_id: str
    file_id: str
    filename: str
    score: float
    text: str
    attributes: dict[str, Any]

    def wire(self) -> JSON:
        return {
            "file_id": self.file_id,
            "filename": self.filename,
            "score": round(self.score, 6),
            "attributes": self.attributes,
            "content": [{"type": "text", "text": self.text}],
        }


class Retriever:
    def __init__(self, files: FileStore, chunks: ChunkStore, embedder: Embedder | None) -> None:
        self.files = files
        self.chunks = chunks
        self.embedder = embedder

    async def search(
        self,
        tenant: str | None,
        store_ids: list[str],
        queries: list[str],
        *,
        filters: Filter | None = None,
        limit: int = 10,
        score_threshold: float = 0.0,
    ) -> list[Hit]:
        """The best `limit` chunks of the tenant's stores (ids already checked)."""
        entries = {
            (entry["vector_store_id"], entry["id"]): (entry, filename)
            for entry, filename in await self.files.all_store_files(tenant, store_ids)
            if entry["status"] == "completed"
            and (filters is None or matches(filters, entry.get("attributes") or {}))
        }
        scope = list(entries)
        queries = list(dict.fromkeys(queries))  # a query asked twice counts once
        rankings: list[list[Chunk]] = []
        for query in queries:
            rankings.append(await self.chunks.lexical(scope, query_terms(query), CANDIDATES))
        if self.embedder is not None and scope:
            rankings += await self._vector_rankings(scope, queries)
        hits = []
        for chunk, score in _fuse(rankings, vector_only=not any(rankings[: len(queries)]))[:limit]:
            if score < score_threshold:
                continue
            entry, filename = entries[(chunk.store_id, chunk.file_id)]
            hits.append(
                Hit(
                    chunk.store_id,
                    chunk.file_id,
                    filename,
                    score,
                    chunk.text,
                    entry.get("attributes") or {},
                )
            )
        return hits

    async def _vector_rankings(
        self, scope: list[tuple[str, str]], queries: list[str]
    ) -> list[list[Chunk]]:
        assert self.embedder is not None
        stored = await self.chunks.embedded(scope)
        if not stored:
            return []
        matrix = np.stack([unpack(c.embedding or b"") for c in stored])
        rankings = []
        for vector in await self.embedder.embed(queries):
            cosines = matrix @ np.asarray(vector, dtype=np.float32)
            best = np.argsort(-cosines, kind="stable")[:CANDIDATES]
            rankings.append([_scored(stored[i], (1.0 + float(cosines[i])) / 2.0) for i in best])
        return rankings


def _scored(chunk: Chunk, score: float) -> Chunk:
    return Chunk(chunk.store_id, chunk.file_id, chunk.position, chunk.text, score)


def _fuse(rankings: list[list[Chunk]], *, vector_only: bool) -> list[tuple[Chunk, float]]:
    """One ranking: RRF of several, or the one non-empty ranking with its own scores."""
    present = [ranking for ranking in rankings if ranking]
    if len(present) == 1:
        scores = [max(chunk.score, 0.0) for chunk in present[0]]
        if not vector_only:
            scores = [s / (1.0 + s) for s in scores]
        return list(zip(present[0], scores, strict=True))
    best = len(present) / (RRF_K + 1)
    fused: dict[tuple[str, str, int], tuple[Chunk, float]] = {}
    for ranking in present:
        for rank, chunk in enumerate(ranking, start=1):
            key = (chunk.store_id, chunk.file_id, chunk.position)
            seen, total = fused.get(key, (chunk, 0.0))
            fused[key] = (seen, total + 1.0 / (RRF_K + rank))
    ordered = sorted(fused.values(), key=lambda pair: -pair[1])
    return [(chunk, total / best) for chunk, total in ordered]
