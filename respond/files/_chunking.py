"""Chunks of a file's text, as OpenAI's `chunking_strategy` describes them.

Sizes are in tokens; respond counts a word or a punctuation mark as one token (no model
tokenizer is involved, so a chunk's size does not depend on which model is served).
A chunk is the original text from its first token to its last, formatting kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from respond.protocol.errors import APIError

__all__ = ["AUTO", "Sizes", "chunk_text", "resolve"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Sizes:
    max_tokens: int
    overlap_tokens: int

    def wire(self) -> dict[str, Any]:
        return {
            "type": "static",
            "static": {
                "max_chunk_size_tokens": self.max_tokens,
                "chunk_overlap_tokens": self.overlap_tokens,
            },
        }


AUTO = Sizes(800, 400)  # what OpenAI's `auto` is


def resolve(strategy: dict[str, Any] | None, param: str = "chunking_strategy") -> Sizes:
    """A request's `chunking_strategy` (None or auto: AUTO), checked as OpenAI does."""
    if strategy is None or strategy["type"] == "auto":
        return AUTO
    static = strategy["static"]
    sizes = Sizes(static["max_chunk_size_tokens"], static["chunk_overlap_tokens"])
    if sizes.overlap_tokens > sizes.max_tokens // 2:
        raise APIError(
            400,
            "'chunk_overlap_tokens' must not exceed half of 'max_chunk_size_tokens'.",
            param=f"{param}.static.chunk_overlap_tokens",
        )
    return sizes


def chunk_text(text: str, sizes: Sizes) -> list[str]:
    spans = [match.span() for match in _TOKEN.finditer(text)]
    step = sizes.max_tokens - sizes.overlap_tokens
    chunks = []
    for first in range(0, len(spans), step):
        last = min(first + sizes.max_tokens, len(spans)) - 1
        chunks.append(text[spans[first][0] : spans[last][1]])
        if last == len(spans) - 1:
            break
    return chunks
