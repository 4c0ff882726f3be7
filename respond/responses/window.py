"""Fitting a prompt into the engine's context window (the request's `truncation`).

With truncation "disabled" a prompt that does not fit is a 400 `context_length_exceeded`
naming both numbers; with "auto" the oldest items are dropped, as few as make it fit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn

from respond.engines._base import ChatMessage, ChatTurn, ContextOverflowError, Engine
from respond.protocol.errors import APIError

__all__ = ["fit", "without_oldest"]

Counter = Callable[[ChatTurn], Awaitable[int]]


async def fit(engine: Engine, turn: ChatTurn, truncation: str, count: Counter) -> None:
    """Make `turn`'s prompt fit the window, or explain by how much it does not.

    `count` is the prompt tokens a turn costs. With truncation "auto" how many items to drop
    is found by a binary search, so a long history costs O(log n) tokenizations, not one per
    dropped item.
    """
    window = engine.info.context_window
    if window is None or (engine.info.upstreams and truncation != "auto"):
        # An upstream reports an overflow itself (a 400 context_length_exceeded): its
        # prompts cost a round trip to count, so they are counted only to truncate.
        return
    tokens = await count(turn)
    if tokens < window:
        return
    droppable = sum(m.role != "system" for m in turn.messages) - 1  # keep the newest
    if truncation != "auto" or droppable < 1:
        _overflow(tokens, window)
    messages = turn.messages
    fits: list[ChatMessage] | None = None
    low, high = 1, droppable  # invariant: dropping fewer than `low` does not fit
    while low <= high:
        middle = (low + high) // 2
        turn.messages = without_oldest(messages, middle)
        tokens = await count(turn)
        if tokens < window:
            fits, high = turn.messages, middle - 1
        else:
            low = middle + 1
    if fits is None:
        _overflow(tokens, window)
    turn.messages = fits


def without_oldest(messages: list[ChatMessage], count: int) -> list[ChatMessage]:
    """`messages` less the `count` oldest non-system ones, and any tool results that would
    then lead the context without the call they answer."""
    kept: list[ChatMessage] = []
    dropped = 0
    leading = True  # no non-system message kept yet
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        if message.role == "system":
            kept.append(message)
        elif not last and (dropped < count or (leading and message.role == "tool")):
            dropped += 1
        else:
            kept.append(message)
            leading = False
    return kept


def _overflow(tokens: int, window: int) -> NoReturn:
    overflow = ContextOverflowError(tokens, window)
    raise APIError(
        400, str(overflow), param="input", code="context_length_exceeded"
    ) from overflow  # the numbers, for APIs that word this their own way
