"""The embedding seam: what turns texts into vectors, and how vectors are kept."""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["Embedder", "pack", "unpack"]


class Embedder(Protocol):
    model: str
    dimensions: int

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        ...

    async def embed_counted(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """The same, and how many tokens the texts were (usage)."""
        ...


def pack(vector: list[float]) -> bytes:
    """A vector as stored: float32, little-endian."""
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")
