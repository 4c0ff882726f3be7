"""Text scanning for the stream parser: where a JSON value ends, what may begin a marker,
reasoning up to its close, non-string values as JSON, indented JSON made compact."""

from __future__ import annotations

import json

from respond.engines.formats._python import read_python
from respond.engines.formats._spec import Params

__all__ = ["Compact", "JsonScanner", "json_text", "partial_suffix", "reasoning_step"]


class JsonScanner:
    """Finds where one JSON value ends, character by character, without parsing it."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.started = False
        self.done = False

    def push(self, char: str) -> None:
        """Consume one character of the value (call only while not done)."""
        if self.in_string:
            if self.escaped:
                self.escaped = False
            elif char == "\\":
                self.escaped = True
            elif char == '"':
                self.in_string = False
                self.done = self.depth == 0
            return
        if char.isspace() and not self.started:
            return
        self.started = True
        if char == '"':
            self.in_string = True
        elif char in "{[":
            self.depth += 1
        elif char in "}]":
            self.depth -= 1
            self.done = self.depth == 0

    def ends_scalar(self, char: str) -> bool:
        """A bare scalar (number, true, ...) at depth 0 ends before a delimiter."""
        return self.started and self.depth == 0 and not self.in_string and char in ",}] \n\t"


_PYTHON = {"True": "true", "False": "false", "None": "null"}


def json_text(raw: str, params: Params | None) -> str:
    """A non-string parameter value as JSON (a string when it is not JSON after all)."""
    if params is not None and params.scalars == "python" and raw in _PYTHON:
        return _PYTHON[raw]
    read = read_python if params is not None and params.scalars == "repr" else json.loads
    try:
        return json.dumps(read(raw), ensure_ascii=False)
    except ValueError:
        return json.dumps(raw, ensure_ascii=False)  # not a literal: the text itself


class Compact:
    """Indented JSON in, the same JSON out with `tojson`'s spacing (", " and ": ")."""

    def __init__(self) -> None:
        self._json = JsonScanner()
        self.spaced = False  # the last character was "," or ":"

    def feed(self, text: str) -> str:
        out = []
        for char in text:
            inside = self._json.in_string
            self._json.push(char)
            if inside:
                out.append(char)
            elif not char.isspace():
                out.append(" " + char if self.spaced else char)
                self.spaced = char in ",:"
        return "".join(out)


def reasoning_step(buffer: str, close: str, *, final: bool, begun: bool) -> tuple[str, str, bool]:
    """Reasoning read off `buffer` up to `close`: (what is ready to emit, the buffer left,
    whether `close` was read). The reasoning is kept without the whitespace around it: the
    templates write their own there (`<think>\n` ... `\n</think>`), and a forced call's
    grammar has the model write theirs. `begun`: some of this block's reasoning is out."""
    at = buffer.find(close)
    if at >= 0:
        ready, rest, closed = buffer[:at].rstrip(), buffer[at + len(close) :], True
    else:
        keep = 0 if final else partial_suffix(buffer, (close,))
        ready = buffer[: len(buffer) - keep]
        if not final:
            ready = ready.rstrip()  # held: the close may come next
        rest, closed = buffer[len(ready) :], False
    return (ready if begun else ready.lstrip()), rest, closed


def partial_suffix(buffer: str, markers: tuple[str, ...]) -> int:
    """The length of the longest end of `buffer` that could begin one of `markers`."""
    best = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(buffer)), best, -1):
            if marker.startswith(buffer[-size:]):
                best = size
                break
    return best
