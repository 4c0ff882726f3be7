"""GBNF grammars checked with llama.cpp's own parser and sampler, on the bundled model's
vocabulary (loaded alone, without the weights)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import llama_cpp

__all__ = ["accepts", "bundled_vocab", "compiles"]


def bundled_vocab() -> Iterator[Any]:
    """The bundled model's vocabulary, for a module-scoped fixture to yield from."""
    from respond.engines.llamacpp import bundled_model_path

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    assert model
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def compiles(vocab: Any, grammar: str) -> bool:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def accepts(vocab: Any, grammar: str, text: str) -> bool:
    """Whether llama.cpp's grammar sampler lets `text` through, as the bundled model's
    tokens (markup as plain text), then lets the output end; a token the grammar forbids
    gets a logit of -inf from the sampler."""
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler, grammar
    raw = text.encode()
    buffer = (llama_cpp.llama_token * (len(raw) + 8))()
    count = llama_cpp.llama_tokenize(vocab, raw, len(raw), buffer, len(raw) + 8, False, False)
    assert count > 0 or not text
    try:
        for token in buffer[:count]:
            if not _allowed(sampler, token):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return _allowed(sampler, llama_cpp.llama_vocab_eos(vocab))
    finally:
        llama_cpp.llama_sampler_free(sampler)


def _allowed(sampler: Any, token: int) -> bool:
    data = (llama_cpp.llama_token_data * 1)()
    data[0].id, data[0].logit, data[0].p = llama_cpp.llama_token(token), 0.0, 0.0
    candidates = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
    return bool(data[0].logit != float("-inf"))
