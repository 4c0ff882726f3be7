"""Indexing in the background: claim a waiting file, extract, chunk, embed, store.

Woken when a file is attached, and polling meanwhile (a replica may attach on another
process, and a crashed process's claims become free). Everything it needs is in the
store, so a restart picks up where the last process stopped (respond/store/chunks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from respond.files._chunking import chunk_text, resolve
from respond.files._embedding import Embedder, pack
from respond.files._extract import ExtractionError
from respond.files._worker import ExtractLimits, extract_in_worker
from respond.store.chunks import Chunk, ChunkStore, Claim

__all__ = ["Indexer"]

log = logging.getLogger("respond.files")

POLL_SECONDS = 2.0


class Indexer:
    def __init__(
        self,
        chunks: ChunkStore,
        runner: str,
        stale_after: int,
        embedder: Embedder | None,
        limits: ExtractLimits | None = None,
    ) -> None:
        self.chunks = chunks
        self.runner = runner
        self.stale_after = stale_after
        self.embedder = embedder
        self.limits = limits or ExtractLimits()
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                await self.drain()
            except Exception:  # the store is down: try again at the next poll
                log.exception("indexing failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            self._wake.clear()

    async def drain(self) -> int:
        """Index every waiting file; how many were taken."""
        taken = 0
        while (claim := await self.chunks.claim(self.runner, self.stale_after)) is not None:
            taken += 1
            await self._index(claim)
        return taken

    async def _index(self, claim: Claim) -> None:
        try:
            chunks = await self._chunks(claim)
        except ExtractionError as exc:
            await self.chunks.fail(self.runner, claim, exc.code, exc.message)
            return
        except Exception as exc:
            log.exception("indexing %s failed", claim.entry["id"])
            await self.chunks.fail(self.runner, claim, "server_error", f"Indexing failed: {exc}")
            return
        await self.chunks.finish(self.runner, claim, chunks)

    async def _chunks(self, claim: Claim) -> list[Chunk]:
        text = await extract_in_worker(claim.filename, claim.content, self.limits)
        strategy = claim.entry.get("chunking_strategy")
        texts = chunk_text(text, resolve(strategy))
        vectors: list[bytes | None] = [None] * len(texts)
        if self.embedder is not None and texts:
            vectors = [pack(v) for v in await self.embedder.embed(texts)]
        return [
            Chunk(claim.store_id, claim.entry["id"], i, t, embedding=v)
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]
