"""Exact repeats of a tool call within one turn: held back, then dropped.

Small models asked for a call (tool_choice "required" or a named function, with parallel
calls allowed) often write the call, then the same call again and again until the token
limit. A call that repeats one already made in the same turn adds nothing, so it is
dropped, and the embedded engine ends the turn there: the response completes with the
calls that were really made.

`RepeatGuard` sits on a stream of deltas. A call is passed through as it streams unless
it is, so far, identical to a call already made (same name, and arguments that begin the
same way, whitespace outside strings ignored); such a call is held back until it either
differs (then everything held is released, and it streams on) or ends as an exact repeat
(then it is dropped).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from respond.engines._base import Delta, ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart

__all__ = ["RepeatGuard"]

log = logging.getLogger("respond.engine")


class _Compactor:
    """Drops the whitespace outside JSON strings, fed in pieces split anywhere."""

    def __init__(self) -> None:
        self.text = ""
        self._in_string = False
        self._escaped = False

    def push(self, piece: str) -> None:
        kept = []
        for char in piece:
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char.isspace():
                continue
            kept.append(char)
        self.text += "".join(kept)


class RepeatGuard:
    """Drops exact repeats of earlier calls of the same turn (one guard per turn)."""

    def __init__(self) -> None:
        self._made: list[tuple[str, str]] = []  # (name, compact arguments) of calls made
        self._name: str | None = None  # the call being read
        self._arguments = _Compactor()
        self._held: list[Delta] | None = None  # its deltas, while it may be a repeat
        self.repeats = 0  # calls dropped as repeats

    @property
    def repeated(self) -> bool:
        return self.repeats > 0

    def feed(self, deltas: Iterable[Delta]) -> list[Delta]:
        out: list[Delta] = []
        for delta in deltas:
            out += self._one(delta)
        return out

    def cut(self, deltas: Iterable[Delta], *, unnamed_call: bool) -> list[Delta]:
        """The last deltas of a turn cut by the token limit. A further call cut off while
        it was still identical to the start of one already made (or before even its name
        was written: `unnamed_call`) is dropped as a repeat."""
        if self._held is None and not (unnamed_call and self._made):
            return self.feed(deltas)
        log.info("dropped a call cut off while it repeated an earlier one")
        self._held = None
        self._name = None
        self.repeats += 1
        return [d for d in deltas if not isinstance(d, _CALL_DELTAS)]

    def _one(self, delta: Delta) -> list[Delta]:
        if isinstance(delta, ToolCallStart):
            self._name = delta.name
            self._arguments = _Compactor()
            may_repeat = any(name == delta.name for name, _ in self._made)
            self._held = [delta] if may_repeat else None
            return [] if may_repeat else [delta]
        if isinstance(delta, ToolCallArgumentsDelta) and self._name is not None:
            self._arguments.push(delta.arguments)
            if self._held is None:
                return [delta]
            self._held.append(delta)
            if self._still_a_prefix():
                return []
            return self._release()
        if isinstance(delta, ToolCallEnd) and self._name is not None:
            made = (self._name, self._arguments.text)
            self._name = None
            if self._held is not None and made in self._made:
                log.info("dropped an exact repeat of the call to %r", made[0])
                self._held = None
                self.repeats += 1
                return []
            self._made.append(made)
            return [*self._release(), delta]
        # Anything else ends what was held: a call interrupted is not a repeat.
        return [*self._release(), delta]

    def _still_a_prefix(self) -> bool:
        so_far = self._arguments.text
        return any(name == self._name and args.startswith(so_far) for name, args in self._made)

    def _release(self) -> list[Delta]:
        held, self._held = self._held or [], None
        return held


_CALL_DELTAS = (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)
