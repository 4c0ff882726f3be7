"""A prompt spelled with a slot's own tokens where the slot holds its text (_respell.py),
with the bundled model's real vocabulary: the text never changes, and what a slot holds
is reused whenever its text is the prompt's."""

from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from typing import Any

import llama_cpp
import pytest

from respond.engines.llamacpp import bundled_model_path
from respond.engines.llamacpp._respell import TokenText, respell

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)
NEXT = "<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    assert model
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def tokenize(vocab: Any, text: str, *, special: bool = True) -> list[int]:
    raw = text.encode()
    buffer = (llama_cpp.llama_token * (len(raw) + 8))()
    count = llama_cpp.llama_tokenize(vocab, raw, len(raw), buffer, len(raw) + 8, False, special)
    assert count >= 0
    return list(buffer[:count])


def in_pieces(vocab: Any, text: str, rng: random.Random) -> list[int]:
    """`text` as a model may write it: tokens of short random pieces (never merged)."""
    tokens: list[int] = []
    at = 0
    while at < len(text):
        size = rng.randint(1, 4)
        tokens += tokenize(vocab, text[at : at + size], special=False)
        at += size
    return tokens


def text_of(vocab: Any, tokens: list[int]) -> bytes:
    out = b""
    for token in tokens:
        buffer = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, 256, 0, True)
        out += buffer.raw[:n]
    return out


def spelled(vocab: Any, held: list[int], tokens: list[int]) -> list[int]:
    def plain(text: bytes) -> list[int]:
        return tokenize(vocab, text.decode(), special=False)

    return respell(held, tokens, TokenText(vocab), plain)


def test_the_next_prompt_keeps_every_token_the_model_wrote(vocab: Any) -> None:
    written = in_pieces(vocab, CALL, random.Random(1))
    held = tokenize(vocab, PROMPT) + written
    tokens = tokenize(vocab, PROMPT + CALL + NEXT)
    assert len(written) > len(tokenize(vocab, CALL))  # the split differs from the tokenizer's
    out = spelled(vocab, held, tokens)
    assert out[: len(held)] == held
    assert text_of(vocab, out) == text_of(vocab, tokens)


def ends(vocab: Any, tokens: list[int]) -> list[int]:
    """Where each token's text ends, in bytes (0 first)."""
    out = [0]
    for token in tokens:
        out.append(out[-1] + len(text_of(vocab, [token])))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_text_is_the_prompts_whatever_the_split(vocab: Any, seed: int) -> None:
    rng = random.Random(seed)
    # What the slot holds: the prompt, and an output that may be the call or differ from it.
    output = rng.choice([CALL, CALL.replace("Paris", "Rome"), CALL[:30], CALL + "\n"])
    held = tokenize(vocab, PROMPT) + in_pieces(vocab, output, rng)
    tokens = tokenize(vocab, PROMPT + CALL + NEXT)
    out = spelled(vocab, held, tokens)
    assert text_of(vocab, out) == text_of(vocab, tokens)
    # How much of the slot is kept, found another way: the last point of the text where
    # a token of each ends, before the texts part (all of it when the slot's text is a
    # beginning of the prompt's).
    ours, theirs = text_of(vocab, held), text_of(vocab, tokens)
    parted = (n for n, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b)
    shared = next(parted, len(ours))
    if shared == len(ours):
        expected = len(held)
    else:
        meet = max(set(ends(vocab, held)) & {n for n in ends(vocab, tokens) if n <= shared})
        expected = ends(vocab, held).index(meet)
    assert out[:expected] == held[:expected]


def test_a_special_token_is_not_its_text_written_out(vocab: Any) -> None:
    """A model that wrote "<|im_end|>" as characters did not end its turn: the prompt's
    <|im_end|> token is read again, not replaced by those characters."""
    held = tokenize(vocab, PROMPT) + in_pieces(vocab, CALL + "<|im_end|>", random.Random(2))
    tokens = tokenize(vocab, PROMPT + CALL + NEXT)
    out = spelled(vocab, held, tokens)
    end = tokenize(vocab, "<|im_end|>")
    assert len(end) == 1 and out.count(end[0]) == tokens.count(end[0])
    assert text_of(vocab, out) == text_of(vocab, tokens)


def test_a_slot_that_ends_inside_a_token_is_kept_whole(vocab: Any) -> None:
    """The slot ends in the middle of one of the prompt's tokens ("sun" of "sunny"): the
    rest of that token is tokenized on its own."""
    prompt = tokenize(vocab, PROMPT + "sunny days")
    held = tokenize(vocab, PROMPT) + tokenize(vocab, "s", special=False)
    held += tokenize(vocab, "un", special=False)
    out = spelled(vocab, held, prompt)
    assert out[: len(held)] == held and text_of(vocab, out) == text_of(vocab, prompt)


def test_the_same_prompt_again_is_unchanged(vocab: Any) -> None:
    tokens = tokenize(vocab, PROMPT)
    held = tokens + in_pieces(vocab, CALL, random.Random(3))
    assert spelled(vocab, held, tokens) == tokens
    assert spelled(vocab, [], tokens) == tokens
