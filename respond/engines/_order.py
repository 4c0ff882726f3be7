"""The ordering rules of `Engine.stream`, checked one delta at a time.

An engine that breaks them would otherwise make the EventBuilder guess (close an item
it was never told to close, drop arguments with nowhere to go). The run wraps every
engine's stream in `checked`, so a broken engine fails its response with an EngineError
that names the rule, instead of producing a subtly wrong one.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from contextlib import aclosing

from respond.engines._base import (
    Delta,
    EngineError,
    Finish,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

__all__ = ["DeltaOrder", "checked"]


class DeltaOrder:
    """Feed every delta of one turn to `check`, then call `end` when the stream stops."""

    def __init__(self) -> None:
        self._call_open = False
        self._usage = False
        self._finished = False

    def check(self, delta: Delta) -> None:
        """Raise EngineError if `delta` may not come after the deltas checked so far."""
        name = type(delta).__name__
        if self._finished:
            self._broken(f"{name} after Finish: Finish is the last delta of a turn")
        if isinstance(delta, Finish):
            self._finished = True
        if self._call_open and not isinstance(delta, ToolCallArgumentsDelta | ToolCallEnd):
            self._broken(
                f"{name} while a tool call is open: a call ends with ToolCallEnd "
                "before anything else comes"
            )
        if self._usage and not isinstance(delta, Finish):
            self._broken(f"{name} after Usage: Usage comes after all output, only Finish follows")
        if isinstance(delta, ToolCallStart):
            self._call_open = True
        elif isinstance(delta, ToolCallArgumentsDelta) and not self._call_open:
            self._broken(
                "ToolCallArgumentsDelta outside a tool call: arguments come between "
                "ToolCallStart and ToolCallEnd"
            )
        elif isinstance(delta, ToolCallEnd):
            if not self._call_open:
                self._broken("ToolCallEnd without a ToolCallStart: it closes the open call")
            self._call_open = False
        elif isinstance(delta, Usage):
            self._usage = True

    def end(self, *, cancelled: bool = False) -> None:
        """The stream stopped: it must have ended with Finish, unless it was cancelled."""
        if not self._finished and not cancelled:
            self._broken("the stream ended without Finish: every turn ends with one Finish")

    @staticmethod
    def _broken(rule: str) -> None:
        raise EngineError(f"The engine broke the delta stream's rules: {rule}.")


async def checked(
    deltas: AsyncGenerator[Delta, None], cancel: threading.Event
) -> AsyncGenerator[Delta, None]:
    """`deltas`, unchanged, each checked against the rules (closes `deltas` when done)."""
    order = DeltaOrder()
    async with aclosing(deltas):
        async for delta in deltas:
            order.check(delta)
            yield delta
    order.end(cancelled=cancel.is_set())
