"""Grammar-constrained sampling that costs little when the model already complies.

llama-cpp-python puts the grammar inside the sampler chain, where it is checked against
every token of the vocabulary at every step (49k tokens for SmolLM2: ~20x slower than
free generation). llama.cpp's own server samples first and checks only the chosen token
against the grammar, applying the grammar to the whole vocabulary only when that token
is rejected. This module does the same, by handing `Llama.generate` a sampler wrapper.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator
from typing import Any

import llama_cpp
import numpy as np

__all__ = ["grammar_sampling"]

_FIRST_TRY = 64  # candidates checked against the grammar before the whole vocabulary
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


class _GrammarFirst:
    """Looks like llama-cpp-python's LlamaSampler to `Llama.generate` (it only calls sample)."""

    def __init__(self, chain: Any, grammar: Any, n_vocab: int) -> None:
        self.chain = chain
        self.grammar = grammar
        self.n_vocab = n_vocab

    def sample(self, ctx: Any, idx: int = -1) -> int:
        # The chain also records the token it picked; with the penalties respond uses
        # (none by default) a rejected pick leaves no trace that matters.
        token: int = self.chain.sample(ctx, idx)
        if not self._allows(token):
            token = self._constrained(ctx, idx)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        return token

    def _allows(self, token: int) -> bool:
        one = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 1.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(one, 1, -1, False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        return not math.isinf(one[0].logit)

    def _constrained(self, ctx: Any, idx: int) -> int:
        """Sample among the tokens the grammar allows: first among the most likely ones
        (the grammar check costs per candidate), the whole vocabulary only if none fits.
        Greedy decoding picks the same token either way; sampling is then limited to the
        top candidates, like a top-k."""
        pointer = llama_cpp.llama_get_logits_ith(ctx.ctx, idx)
        logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
        top = np.argpartition(-logits, _FIRST_TRY)[:_FIRST_TRY]
        token = self._sample_among(top.astype(np.intc), logits[top])
        if token is None:
            token = self._sample_among(np.arange(self.n_vocab, dtype=np.intc), logits)
        assert token is not None, "the grammar allows no token"
        return token

    def _sample_among(self, ids: np.ndarray[Any, Any], logits: np.ndarray[Any, Any]) -> int | None:
        data = np.zeros(len(ids), dtype=_TOKEN_DATA)
        data["id"] = ids
        data["logit"] = logits
        candidates = llama_cpp.llama_token_data_array(
            data.ctypes.data_as(llama_cpp.llama_token_data_p), len(ids), -1, False
        )
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        if not np.isfinite(data["logit"][: candidates.size]).any():
            return None
        llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(candidates))
        return int(data["id"][candidates.selected])


@contextlib.contextmanager
def grammar_sampling(llm: Any, grammar: str | None) -> Iterator[None]:
    """Within the block, `llm.generate(...)` (called without grammar=) obeys `grammar`."""
    if grammar is None:
        yield
        return
    vocab = llm._model.vocab
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if not sampler:
        raise ValueError("llama.cpp could not parse the grammar")
    original = llm._init_sampler

    def init_sampler(*args: Any, **kwargs: Any) -> _GrammarFirst:
        return _GrammarFirst(original(*args, **kwargs), sampler, llm.n_vocab())

    llm._init_sampler = init_sampler
    try:
        yield
    finally:
        del llm._init_sampler
        llama_cpp.llama_sampler_free(sampler)
