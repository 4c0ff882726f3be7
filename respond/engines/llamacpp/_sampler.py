"""One slot's sampler: its own chain (penalties, top-k/top-p, temperature, seed) and
grammar-constrained sampling that costs little when the model already complies.

A grammar inside the sampler chain is checked against every token of the vocabulary at
every step (49k tokens for SmolLM2: ~20x slower than free generation). llama.cpp's own
server samples first and checks only the chosen token against the grammar, applying the
grammar to the whole vocabulary only when that token is rejected. This module does the
same. Building a grammar sampler parses the grammar: call it on a big stack (_native.py).
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp
import numpy as np

from respond.engines._base import Sampling
from respond.engines.llamacpp._model import NativeModel

__all__ = ["SlotSampler"]

_FIRST_TRY = 64  # candidates checked against the grammar before the whole vocabulary
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
_PENALTY_LAST_N = 64  # llama-cpp-python's window for presence/frequency penalties


class SlotSampler:
    """Samples a slot's next token from the logits of its batch output."""

    def __init__(self, model: NativeModel, sampling: Sampling, grammar: str | None, seed: int):
        self.model = model
        self.chain = _chain(model, sampling, seed)
        self.grammar: Any = None
        if grammar is not None:
            self.grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar.encode("utf-8"), b"root"
            )
            if not self.grammar:
                self.close()
                raise ValueError("llama.cpp could not parse the grammar")

    def sample(self, index: int) -> int:
        # The chain also records the token it picked; with the penalties respond uses
        # (none by default) a rejected pick leaves no trace that matters.
        token = int(llama_cpp.llama_sampler_sample(self.chain, self.model.ctx, index))
        if self.grammar is None:
            return token
        if not self._allows(token):
            token = self._constrained(index)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        return token

    def close(self) -> None:
        for sampler in (self.chain, self.grammar):
            if sampler:
                llama_cpp.llama_sampler_free(sampler)
        self.chain = self.grammar = None

    def _allows(self, token: int) -> bool:
        one = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 1.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(one, 1, -1, False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        return not math.isinf(one[0].logit)

    def _constrained(self, index: int) -> int:
        """Sample among the tokens the grammar allows: first among the most likely ones
        (the grammar check costs per candidate), the whole vocabulary only if none fits.
        Greedy decoding picks the same token either way; sampling is then limited to the
        top candidates, like a top-k."""
        logits = self.model.logits(index)
        top = np.argpartition(-logits, _FIRST_TRY)[:_FIRST_TRY]
        token = self._sample_among(top.astype(np.intc), logits[top])
        if token is None:
            token = self._sample_among(np.arange(self.model.n_vocab, dtype=np.intc), logits)
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
        llama_cpp.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        return int(data["id"][candidates.selected])


def _chain(model: NativeModel, sampling: Sampling, seed: int) -> Any:
    """The chain llama-cpp-python's `generate` built for the same parameters (min_p 0,
    typical 1 and repeat 1 are no-ops there, so they are left out)."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())

    def add(sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(chain, sampler)

    if sampling.presence_penalty or sampling.frequency_penalty:
        add(
            llama_cpp.llama_sampler_init_penalties(
                model.n_vocab,
                _PENALTY_LAST_N,
                1.0,
                sampling.frequency_penalty,
                sampling.presence_penalty,
            )
        )
    temperature = sampling.temperature
    if temperature == 0.0:
        add(llama_cpp.llama_sampler_init_greedy())
        return chain
    if temperature > 0.0:
        add(llama_cpp.llama_sampler_init_top_k(sampling.top_k))
        add(llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
        add(llama_cpp.llama_sampler_init_temp(temperature))
    add(llama_cpp.llama_sampler_init_dist(seed))
    return chain
