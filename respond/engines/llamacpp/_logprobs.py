"""Log probabilities of a sampled token and its top alternatives, from the raw logits."""

from __future__ import annotations

from typing import Any

import numpy as np

from respond.engines._base import Delta, TextDelta, TokenLogprob
from respond.engines.llamacpp._model import NativeModel

__all__ = ["token_logprob", "with_logprobs"]


def token_logprob(
    model: NativeModel, token: int, piece: bytes, logits: np.ndarray[Any, Any], top: int
) -> TokenLogprob:
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    alternatives: list[tuple[str, float, tuple[int, ...]]] = []
    if top:
        best = np.argpartition(-logprobs, top)[:top]
        for alt in sorted(best, key=lambda i: -logprobs[i]):
            alt_piece = model.detokenize([int(alt)])
            text = alt_piece.decode("utf-8", errors="replace")
            alternatives.append((text, float(logprobs[alt]), tuple(alt_piece)))
    return TokenLogprob(
        token=piece.decode("utf-8", errors="replace"),
        logprob=float(logprobs[token]),
        bytes=tuple(piece),
        top=tuple(alternatives),
    )


def with_logprobs(deltas: list[Delta], logprobs: tuple[TokenLogprob, ...]) -> list[Delta]:
    """Attach tokens' logprobs to the text they produced (markup tokens carry none)."""
    if not logprobs:
        return deltas
    for index, delta in enumerate(deltas):
        if isinstance(delta, TextDelta):
            out = list(deltas)
            out[index] = TextDelta(delta.text, logprobs)
            return out
    return deltas
