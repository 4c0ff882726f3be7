"""A prompt spelled as a slot's cells spell it, so the prompt cache survives token splits.

A model writes its output one token at a time, and the tokenizer, given the same text in
the next turn's prompt, may split it otherwise: the bundled SmolLM2 writes a Qwen3-Coder
call in 49 tokens ("day" "s", "<" "/" "function") that tokenize as 47 ("days", "</"
"function"). Compared token by token, the next prompt left the slot's cache at the call's
first differing token, so every tool turn read the call again, although its text is the
one the template renders.

So before a prompt is fed, the part whose text the slot already holds is spelled with the
slot's own tokens: the text is unchanged, the model reads the tokens it wrote, and their
cells are reused. Control and user-defined tokens (<|im_end|>, ...) match only themselves,
never the same characters written as text.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llama_cpp

from respond.engines.llamacpp._slot import common_prefix

__all__ = ["TokenText", "respell"]

# A token's bytes, or None for a control or user-defined token (it matches only itself).
Piece = Callable[[int], bytes | None]
Tokenize = Callable[[bytes], list[int]]  # plain text, no BOS, no special tokens

_SPECIAL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED


class TokenText:
    """Each token's text as bytes (None for special tokens), remembered once read."""

    def __init__(self, vocab: object) -> None:
        self.vocab = vocab
        self._known: dict[int, bytes | None] = {}

    def __call__(self, token: int) -> bytes | None:
        if token not in self._known:
            self._known[token] = self._read(token)
        return self._known[token]

    def _read(self, token: int) -> bytes | None:
        if token < 0:  # an image's placeholder (_media.py): it matches only itself
            return None
        if llama_cpp.llama_vocab_get_attr(self.vocab, token) & _SPECIAL:
            return None
        size = 64
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buffer, size, 0, False)
            if n >= 0:
                return buffer.raw[:n]
            size = -n  # too small: llama.cpp says how many bytes the piece needs


def respell(held: list[int], tokens: list[int], piece: Piece, tokenize: Tokenize) -> list[int]:
    """`tokens` with its longest prefix whose text `held` spells replaced by held's tokens.

    Both are walked side by side from their common prefix, a token at a time on the side
    whose text is behind, while the texts agree; wherever both reach the same point of the
    text, `held` spells the prompt up to there. When all of `held` agrees but ends inside
    one of `tokens`, the rest of that token's text is tokenized on its own, so the whole
    of `held` is kept (if that rest tokenizes to the same text: not a cut character, not
    a tokenizer that adds a space in front).
    """
    i = j = common_prefix(held, tokens)
    best = (i, j)  # held[:i] spells tokens[:j]
    ours = theirs = b""  # text of held[:i] and of tokens[:j] past the point where they met
    while True:
        if not ours and not theirs:
            best = (i, j)
            if i < len(held) and j < len(tokens) and held[i] == tokens[j]:
                i, j = i + 1, j + 1  # the same token (a special one too)
                continue
        held_behind = len(ours) <= len(theirs)
        if held_behind and i == len(held):
            rest = _spelled(theirs, piece, tokenize)
            if rest is not None:
                return held + rest + tokens[j:]
            break
        if not held_behind and j == len(tokens):
            break
        text = piece(held[i] if held_behind else tokens[j])
        if text is None:  # a special token where the other side has text
            break
        if held_behind:
            ours, i = ours + text, i + 1
        else:
            theirs, j = theirs + text, j + 1
        shared = min(len(ours), len(theirs))
        if ours[:shared] != theirs[:shared]:
            break
        ours, theirs = ours[shared:], theirs[shared:]
    return held[: best[0]] + tokens[best[1] :]


def _spelled(text: bytes, piece: Piece, tokenize: Tokenize) -> list[int] | None:
    """Tokens whose text is exactly `text`, or None."""
    if not text:
        return []
    tokens = tokenize(text)
    pieces = [piece(token) for token in tokens]
    if any(p is None for p in pieces) or b"".join(p or b"" for p in pieces) != text:
        return None
    return tokens
