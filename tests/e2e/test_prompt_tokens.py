"""The embedded engine tokenizes a request's prompt once: counted for the context-window
check, then generated from (the real bundled model)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from respond.engines._base import ChatMessage, ChatTurn, Delta, Usage
from respond.engines.llamacpp import bundled_model_path
from respond.engines.llamacpp._engine import LlamaCppEngine


@pytest.fixture(scope="module")
def engine() -> Iterator[LlamaCppEngine]:
    loaded = LlamaCppEngine(bundled_model_path(), alias="m", n_ctx=512, n_slots=1, n_threads=1)
    loaded.load()
    assert loaded.ready, loaded.load_error
    yield loaded


def turn(text: str) -> ChatTurn:
    return ChatTurn(
        model="m", messages=[ChatMessage(role="user", content=text)], max_output_tokens=2
    )


async def generated(engine: LlamaCppEngine, chat: ChatTurn) -> list[Delta]:
    return [delta async for delta in engine.stream(chat)]


def test_a_counted_prompt_is_not_tokenized_again_to_generate(
    engine: LlamaCppEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenized: list[str] = []
    real = engine._tokenize_text

    def counting(text: str) -> list[int]:
        tokenized.append(text)
        return real(text)

    monkeypatch.setattr(engine, "_tokenize_text", counting)
    first = turn("Name a colour.")
    counted = asyncio.run(engine.count_tokens(first))
    usage = [d for d in asyncio.run(generated(engine, first)) if isinstance(d, Usage)]
    assert len(tokenized) == 1 and usage[0].input_tokens == counted
    asyncio.run(generated(engine, turn("Name a fruit.")))  # another prompt: tokenized
    assert len(tokenized) == 2


def test_a_prompt_over_the_window_is_not_kept(engine: LlamaCppEngine) -> None:
    long = turn("word " * 600)
    assert asyncio.run(engine.count_tokens(long)) >= engine.n_ctx
    assert (engine.render(long), ()) not in engine._tokenized
