"""Fitting the prompt into the context window: truncation "auto" by binary search, and the
400 that names both numbers when it does not fit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from respond.engines import _base as d
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.responses.run import Responses
from respond.responses.window import fit, without_oldest
from respond.testing import FakeEngine


def msg(role: Any, content: str = "") -> d.ChatMessage:
    return d.ChatMessage(role=role, content=content)


def test_without_oldest_keeps_system_messages_and_no_leading_tool_result() -> None:
    messages = [msg("system"), msg("user", "a"), msg("assistant", "b"), msg("tool", "c")]
    messages += [msg("user", "d")]
    kept = without_oldest(messages, 2)
    assert [m.content for m in kept] == ["", "d"]  # the tool result went with its call
    assert [m.content for m in without_oldest(messages, 1)] == ["", "b", "c", "d"]
    assert [m.content for m in without_oldest(messages, 10)] == ["", "d"]


class CountingEngine(FakeEngine):
    """A FAKE engine that counts how often the prompt is tokenized, with a small window."""

    def __init__(self, window: int, upstreams: tuple[str, ...] = ()) -> None:
        super().__init__([[{"text": "ok"}]])
        self.info = d.ModelInfo(
            id="fake-model", owned_by="t", context_window=window, backend="f", upstreams=upstreams
        )
        self.counted = 0

    async def count_tokens(self, turn: d.ChatTurn) -> int:
        self.counted += 1
        return await super().count_tokens(turn)


def words(count: int) -> list[d.ChatMessage]:
    """`count` user messages of 2 tokens each (FakeEngine counts words + 1)."""
    return [msg("user", f"word{i}") for i in range(count)]


def fitted(engine: CountingEngine, messages: list[d.ChatMessage], truncation: str) -> d.ChatTurn:
    turn = d.ChatTurn(model="fake-model", messages=messages)
    asyncio.run(fit(engine, turn, truncation, engine.count_tokens))
    return turn


def test_truncation_auto_takes_a_logarithmic_number_of_tokenizations() -> None:
    engine = CountingEngine(window=100)
    service = Responses({"fake-model": engine})
    items = [{"role": "user", "content": f"word{i}"} for i in range(4000)]
    body = CreateResponseBody.model_validate({"input": items, "truncation": "auto"})
    run = asyncio.run(service.prepare(body))
    # Each message costs 2 tokens: the newest 49 fit a window of 100.
    assert len(run.turn.messages) == 49
    assert run.turn.messages[-1].content == "word3999"
    assert engine.counted <= 14  # 1 + ceil(log2(4000)); one per dropped item was 3952


def test_a_prompt_that_fits_is_left_as_it_is() -> None:
    engine = CountingEngine(window=100)
    messages = words(10)
    assert fitted(engine, messages, "auto").messages == messages
    assert engine.counted == 1


def test_too_long_without_truncation_is_a_400_naming_both_numbers() -> None:
    engine = CountingEngine(window=10)
    with pytest.raises(APIError) as caught:
        fitted(engine, words(6), "disabled")
    error = caught.value
    assert (error.status, error.code, error.param) == (400, "context_length_exceeded", "input")
    overflow = error.__cause__
    assert isinstance(overflow, d.ContextOverflowError)
    assert (overflow.prompt_tokens, overflow.context_window) == (12, 10)
    assert error.message == str(overflow)


def test_auto_cannot_drop_the_newest_message() -> None:
    engine = CountingEngine(window=3)
    system = msg("system", "be brief and kind")
    with pytest.raises(APIError) as caught:
        fitted(engine, [system, msg("user", "one two three")], "auto")
    assert caught.value.code == "context_length_exceeded"


def test_an_upstream_prompt_is_counted_only_to_truncate() -> None:
    # The upstream answers an overflow itself: counting costs a round trip, so it is skipped.
    engine = CountingEngine(window=10, upstreams=("http://upstream.invalid",))
    assert len(fitted(engine, words(6), "disabled").messages) == 6
    assert engine.counted == 0
    assert len(fitted(engine, words(6), "auto").messages) == 4
    assert engine.counted > 0
