"""Tokenizing a long prompt in linear time.

llama.cpp's tokenizer first splits the text at every special token (<|im_start|>, ...),
and that split is quadratic in how many there are: a prompt of 16,000 short messages
took 80 s in one call. Splitting the text ourselves just before special tokens and
tokenizing the pieces gives the same tokens (llama.cpp never merges across a special
token, and each piece starts with one, as after a special token inside one call) in
time proportional to the length.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import llama_cpp

from respond.engines.llamacpp._model import NativeModel

__all__ = ["SpecialSplitter"]

# Special tokens per piece: few enough that llama.cpp's own split stays cheap.
_PER_PIECE = 32


class SpecialSplitter:
    """Tokenizes with `model` as model.tokenize(text, special=True) would, piece by piece."""

    def __init__(self, model: NativeModel) -> None:
        self.model = model
        pieces = _special_pieces(model.vocab)
        # Longest first, so a special token that begins another is not matched instead.
        alternatives = sorted(pieces, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, alternatives))) if pieces else None

    def tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        tokens: list[int] = []
        for index, piece in enumerate(self._pieces(text)):
            encoded = piece.encode("utf-8")
            tokens += self.model.tokenize(encoded, add_bos=add_bos and index == 0, special=True)
        return tokens

    def _pieces(self, text: str) -> list[str]:
        if self._pattern is None:
            return [text]
        starts = [match.start() for match in self._pattern.finditer(text)]
        cuts = [0, *starts[_PER_PIECE::_PER_PIECE], len(text)]
        return [text[a:b] for a, b in itertools.pairwise(cuts) if b > a] or [text]


def _special_pieces(vocab: Any) -> list[str]:
    """The text of every control or user-defined token (what special=True matches)."""
    kinds = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
    out: list[str] = []
    for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        if llama_cpp.llama_vocab_get_attr(vocab, token) & kinds:
            text: bytes = llama_cpp.llama_vocab_get_text(vocab, token)
            if text:
                out.append(text.decode("utf-8", errors="replace"))
    return out
