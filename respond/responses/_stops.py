"""Stop sequences, for every engine: the text ends just before the first one.

The run passes each engine delta through `StopSequences.push`. Text that might be the
start of a stop sequence is held back until the next delta tells; once a sequence
appears, the text before it goes out, the rest of the turn is dropped (the run then
cancels generation) and `matched` names the sequence, for APIs that report it.
"""

from __future__ import annotations

from collections.abc import Sequence

from respond.engines._base import Delta, Finish, TextDelta, Usage

__all__ = ["StopSequences"]


class StopSequences:
    def __init__(self, sequences: Sequence[str]) -> None:
        self._sequences = tuple(s for s in sequences if s)
        self._held = ""
        self.matched: str | None = None

    def push(self, delta: Delta) -> list[Delta]:
        if not self._sequences:
            return [delta]
        if self.matched is not None:
            # Past the stop: only the turn's accounting goes on.
            if isinstance(delta, Usage):
                return [delta]
            return [Finish("stop")] if isinstance(delta, Finish) else []
        if isinstance(delta, TextDelta):
            return self._text(self._held + delta.text)
        return [*self._release(), delta]

    def _text(self, text: str) -> list[Delta]:
        found = [(text.find(s), s) for s in self._sequences if s in text]
        if found:
            at, sequence = min(found)
            self.matched, self._held = sequence, ""
            return [TextDelta(text[:at])] if at else []
        keep = self._partial_suffix(text)
        self._held = text[len(text) - keep :]
        sent = text[: len(text) - keep]
        return [TextDelta(sent)] if sent else []

    def _partial_suffix(self, text: str) -> int:
        """The length of the longest end of `text` that begins some stop sequence."""
        for size in range(min(len(text), max(map(len, self._sequences)) - 1), 0, -1):
            tail = text[-size:]
            if any(s.startswith(tail) for s in self._sequences):
                return size
        return 0

    def _release(self) -> list[Delta]:
        held, self._held = self._held, ""
        return [TextDelta(held)] if held else []
