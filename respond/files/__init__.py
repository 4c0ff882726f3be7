"""Files in vector stores: text extraction, chunking, indexing in the background, search.

`FileService` is what the Files, Vector Stores and Embeddings routes and the
`file_search` tool share; it exists when the app has a SQL store (docs/files.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from respond.files._chunking import AUTO, Sizes, resolve
from respond.files._embedding import Embedder
from respond.files._extract import ExtractionError, extract_text
from respond.files._filters import check_filter, matches
from respond.files._indexer import Indexer
from respond.files._llama_embedder import bundled_embedder, file_embedder
from respond.files._search import Hit, Retriever
from respond.files._upstream_embedder import upstream_embedder
from respond.files._worker import ExtractLimits
from respond.protocol.errors import APIError
from respond.protocol.files import Filter
from respond.store.base import Store
from respond.store.chunks import ChunkStore
from respond.store.files import FileStore
from respond.store.sql import SQLStore

__all__ = [
    "AUTO",
    "Embedder",
    "ExtractLimits",
    "ExtractionError",
    "FileService",
    "Hit",
    "bundled_embedder",
    "file_embedder",
    "Sizes",
    "check_filter",
    "extract_text",
    "make_file_service",
    "matches",
    "resolve",
    "upstream_embedder",
]


@dataclass(frozen=True)
class FileService:
    files: FileStore
    chunks: ChunkStore
    indexer: Indexer
    retriever: Retriever
    max_file_bytes: int
    embedder: Embedder | None

    async def search(
        self,
        tenant: str | None,
        store_ids: list[str],
        queries: list[str],
        *,
        filters: Filter | None = None,
        limit: int = 10,
        score_threshold: float = 0.0,
        param: str = "vector_store_id",
    ) -> list[Hit]:
        """Search the tenant's stores (each now active); another tenant's store, or one that
        does not exist, is a 404 naming `param`."""
        if filters is not None:
            check_filter(filters, "filters")
        now = int(time.time())
        for store_id in store_ids:
            changes = {"last_active_at": now}
            if await self.files.update_vector_store(tenant, store_id, changes) is None:
                raise APIError(
                    404,
                    f"Vector_store with id '{store_id}' not found.",
                    param=param,
                    code="vector_store_not_found",
                )
        return await self.retriever.search(
            tenant,
            store_ids,
            queries,
            filters=filters,
            limit=limit,
            score_threshold=score_threshold,
        )


def make_file_service(
    store: Store | None,
    *,
    runner: str,
    stale_after: int,
    max_file_mb: int,
    embedder: Embedder | None = None,
    extract_limits: ExtractLimits | None = None,
) -> FileService | None:
    """The service over `store`; None when there is no SQL store to keep files in."""
    if not isinstance(store, SQLStore):
        return None
    files, chunks = FileStore(store), ChunkStore(store)
    return FileService(
        files=files,
        chunks=chunks,
        indexer=Indexer(chunks, runner, stale_after, embedder, extract_limits),
        retriever=Retriever(files, chunks, embedder),
        max_file_bytes=max_file_mb * 1024 * 1024,
        embedder=embedder,
    )
