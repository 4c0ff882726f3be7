"""Turn a model's raw text stream into typed deltas: text, reasoning, tool calls.

Pure and I/O-free: `OutputParser.feed(chunk)` takes whatever the tokenizer produced
(markup may be split anywhere across chunks) and returns the deltas that are certain so
far; `close()` flushes the rest at the end of generation. Text that might be the start of
markup is held back until it is known not to be, so `<think>`, `<tool_call>`,
`[TOOL_CALLS]`, ... never reach the client as text, not even for one chunk.

Dialects (how a model family writes tool calls):

- ``hermes``  (Hermes, Qwen 2.5/3, and respond's fallback prompt)::

      <tool_call>
      {"name": "get_weather", "arguments": {"city": "Paris"}}
      </tool_call>

- ``mistral``: ``[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]``
- ``llama3``: the whole turn is ``{"name": "f", "parameters": {...}}`` (optionally after
  ``<|python_tag|>``).

Arguments stream as they are generated (once `"name"` and the start of `"arguments"` are
seen); a call written in another key order is emitted whole when its object closes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from respond.engines._base import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)

if TYPE_CHECKING:  # the formats import this module
    from respond.engines.formats._base import ParseOptions

__all__ = ["Dialect", "JsonScanner", "OutputParser", "partial_suffix", "reasoning_step"]

Dialect = Literal["hermes", "mistral", "llama3"]

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_OPEN = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"

# `{"name": "x", "arguments": ` at the start of a call object: from here on the
# arguments can be streamed as they come.
_HEADER = re.compile(
    r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)


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


@dataclass
class _Call:
    """One call object being read: `{"name": ..., "arguments": ...}`."""

    text: str = ""  # the object's text so far
    name_seen: bool = False  # ToolCallStart emitted
    args_from: int = -1  # offset of the arguments value in text (when streaming)
    args_sent: int = 0  # characters of the arguments value already emitted


class OutputParser:
    """Raw model text in, deltas out. One instance per generated turn."""

    def __init__(self, dialect: Dialect | None, options: ParseOptions) -> None:
        self.dialect = dialect if options.tools is not None else None
        self._think = options.think
        self.in_reasoning = options.in_reasoning and options.think is not None
        self._new_call_id = options.new_call_id
        self._after_block = options.after_block
        self._buffer = ""
        self._state: Literal["text", "call_open", "call", "call_close", "list_next"] = "text"
        self._call: _Call | None = None
        self._object = JsonScanner()
        self._args = JsonScanner()
        self._at_start = True  # nothing but whitespace emitted as text yet
        self._calls = 0  # calls read so far
        self._strip_text = False  # drop `after_block` after a reasoning block or a call
        self._reasoned = False  # the current reasoning block's text has begun
        # With stop_at_call, the parser stops at the first call's markup and notes where
        # (an offset in the text fed so far): the engine then writes the call again from
        # that point under a grammar.
        self.stop_at_call = options.stop_at_call
        self.fed = 0
        self.halted_at: int | None = None

    # ------------------------------------------------------------ public

    def feed(self, chunk: str) -> list[Delta]:
        if self.halted_at is not None:
            return []
        self.fed += len(chunk)
        self._buffer += chunk
        out: list[Delta] = []
        while True:
            before = (self._state, len(self._buffer), self.in_reasoning)
            out += self._step(final=False)
            if (self._state, len(self._buffer), self.in_reasoning) == before:
                return out

    def close(self) -> list[Delta]:
        """End of generation: flush what was held back; finish or salvage an open call."""
        out: list[Delta] = []
        if self.halted_at is not None:
            return []
        if self._marker_begun():
            self._buffer = ""  # the start of a further call's marker, cut short
        while self._buffer or self._call is not None:
            before = (self._state, len(self._buffer), self._call is None)
            out += self._step(final=True)
            if (self._state, len(self._buffer), self._call is None) == before:
                break
        if self._call is not None and self.unnamed_call and self.dialect != "llama3":
            # Call markup cut short before its name: neither a call nor the model's words.
            # (Llama 3's bare JSON may be a plain answer, so it stays text.)
            self._call = None
        elif self._call is not None:
            out += self._finish_call(at_end=True)
        if self._buffer.strip() or not self._at_start:
            out += self._text(self._buffer)
        self._buffer = ""
        return out

    @property
    def unnamed_call(self) -> bool:
        """A call's markup has begun, but not even its name is known yet."""
        if self._call is not None:
            return not self._call.name_seen
        if self._marker_begun():
            return True
        return self._state in ("call_open", "call") and self.halted_at is None

    def _marker_begun(self) -> bool:
        """After a call, the text held back so far is the start of another call's marker."""
        held = self._buffer.strip()
        markers = [m for m in self._markers() if self._think is None or m != self._think.open]
        return (
            self._calls > 0
            and self._state == "text"
            and bool(held)
            and any(marker.startswith(held) for marker in markers)
        )

    # ------------------------------------------------------------ states

    def _step(self, *, final: bool) -> list[Delta]:
        if self.in_reasoning:
            return self._reasoning_step(final)
        if self._state == "text":
            return self._text_step(final)
        if self._state == "call_open":
            return self._call_open_step(final)
        if self._state == "call":
            return self._call_step(final)
        if self._state == "call_close":
            return self._call_close_step(final)
        return self._list_next_step(final)

    def _reasoning_step(self, final: bool) -> list[Delta]:
        assert self._think is not None
        ready, self._buffer, closed = reasoning_step(
            self._buffer, self._think.close, final=final, begun=self._reasoned
        )
        if closed:
            self.in_reasoning = False
            self._strip_text = True
        self._reasoned = not closed and (self._reasoned or bool(ready))
        return [ReasoningDelta(ready)] if ready else []

    def _markers(self) -> tuple[str, ...]:
        markers: list[str] = [self._think.open] if self._think else []
        if self.dialect == "hermes":
            markers.append(HERMES_OPEN)
        elif self.dialect == "mistral":
            markers.append(MISTRAL_OPEN)
        elif self.dialect == "llama3":
            markers.append(PYTHON_TAG)
        return tuple(markers)

    def _text_step(self, final: bool) -> list[Delta]:
        buffer = self._buffer
        if self._strip_text:
            buffer = buffer.lstrip(self._after_block)
            self._buffer = buffer
            if not buffer:
                return []
            self._strip_text = False
        if self.dialect == "llama3" and self._at_start and buffer.lstrip().startswith("{"):
            # Llama 3 writes a call as the whole turn: a JSON object from the first character.
            if self._halt(self.fed - len(buffer.lstrip())):
                return []
            self._buffer = buffer.lstrip()
            self._state = "call"
            return []
        if self.dialect == "llama3" and self._at_start and not buffer.strip() and not final:
            return []  # wait: leading whitespace may precede a JSON call
        markers = self._markers()
        found = [(buffer.find(m), m) for m in markers if m in buffer]
        if found:
            at, marker = min(found)
            # Whitespace before the first marker, with nothing said yet, is the template's
            # (the "\n" some write before a turn's calls), not text of the model's.
            said = buffer[:at]
            out = self._text(said if said.strip() or not self._at_start else "")
            thinks = self._think is not None and marker == self._think.open
            if not thinks and self._halt(self.fed - len(buffer) + at):
                return out
            self._buffer = buffer[at + len(marker) :]
            if thinks:
                self.in_reasoning = True
            else:
                self._state = "call" if marker == PYTHON_TAG else "call_open"
            return out
        keep = 0 if final else partial_suffix(buffer, markers)
        ready = buffer[: len(buffer) - keep]
        if self._at_start and not ready.strip():
            return []  # held: markup if a marker comes next (above), else the text's
        self._buffer = buffer[len(ready) :]
        return self._text(ready)

    def _halt(self, offset: int) -> bool:
        if self.stop_at_call:
            self.halted_at = offset
            self._buffer = ""
        return self.stop_at_call

    def _call_open_step(self, final: bool) -> list[Delta]:
        """Right after the opening marker: a call object, or (Mistral) a list of them."""
        stripped = self._buffer.lstrip()
        if not stripped:
            self._buffer = ""
            return []
        if self.dialect == "mistral" and stripped[0] == "[":
            self._buffer = stripped[1:]
            self._state = "list_next"
            return []
        self._buffer = stripped
        self._state = "call"
        return []

    def _list_next_step(self, final: bool) -> list[Delta]:
        stripped = self._buffer.lstrip().lstrip(",").lstrip()
        if not stripped:
            self._buffer = ""
            return []
        if stripped[0] == "]":
            self._buffer = stripped[1:]
            self._state = "text"
            return []
        self._buffer = stripped
        self._state = "call"
        return []

    def _call_step(self, final: bool) -> list[Delta]:
        if self._call is None and not self._buffer.lstrip().startswith("{"):
            return self._not_json(final)
        if self._call is None:
            self._call = _Call()
            self._object = JsonScanner()
        call = self._call
        out: list[Delta] = []
        consumed = 0
        for char in self._buffer:
            if self._object.done:
                break
            self._object.push(char)
            call.text += char
            consumed += 1
        self._buffer = self._buffer[consumed:]
        out += self._stream_arguments(call)
        if self._object.done:
            out += self._finish_call()
        return out

    def _stream_arguments(self, call: _Call) -> list[Delta]:
        out: list[Delta] = []
        if not call.name_seen:
            match = _HEADER.match(call.text)
            # Wait for the value's first character, so the whitespace before it is not sent.
            if match is None or match.end() == len(call.text):
                return out
            name = json.loads(f'"{match.group(1)}"')
            call.name_seen = True
            call.args_from = match.end()
            self._args = JsonScanner()
            out.append(ToolCallStart(call_id=self._new_call_id(), name=name))
        # Emit the arguments value as far as it has been written, and no further.
        pending = call.text[call.args_from + call.args_sent :]
        take = 0
        for char in pending:
            if self._args.done or self._args.ends_scalar(char):
                self._args.done = True
                break
            self._args.push(char)
            take += 1
        if take:
            out.append(ToolCallArgumentsDelta(pending[:take]))
            call.args_sent += take
        return out

    def _finish_call(self, at_end: bool = False) -> list[Delta]:
        call = self._call
        assert call is not None
        self._call = None
        if self.dialect == "hermes":
            self._state = "call_close"
        elif self.dialect == "mistral":
            self._state = "list_next"
        else:
            self._state = "text"
        self._at_start = False
        self._calls += 1
        if call.name_seen:
            return [ToolCallEnd(at_end=at_end)]
        return self._whole_call(call.text)

    def _whole_call(self, text: str) -> list[Delta]:
        """A call not written name-first: parse it whole, or give it back as text."""
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", data.get("parameters", {}))
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            return [
                ToolCallStart(call_id=self._new_call_id(), name=data["name"]),
                ToolCallArgumentsDelta(arguments),
                ToolCallEnd(),
            ]
        # Not a call after all (a Llama 3 turn that is plain JSON, or broken markup):
        # the content is the model's text; the markup around it is not.
        if self.dialect != "hermes":
            self._state = "text"
        return self._text(text)

    def _not_json(self, final: bool) -> list[Delta]:
        """Markup opened but no JSON object follows: keep the words, drop the markup."""
        if self.dialect != "hermes":
            self._state = "text"
            return []
        end = self._buffer.find(HERMES_CLOSE)
        if end < 0 and not final:
            return []
        body = self._buffer if end < 0 else self._buffer[:end]
        self._buffer = "" if end < 0 else self._buffer[end + len(HERMES_CLOSE) :]
        self._state = "text"
        return self._text(body.strip())

    def _call_close_step(self, final: bool) -> list[Delta]:
        stripped = self._buffer.lstrip()
        if stripped.startswith(HERMES_CLOSE):
            self._buffer = stripped[len(HERMES_CLOSE) :]
            self._state = "text"
            self._strip_text = True
            return []
        if HERMES_CLOSE.startswith(stripped):
            if final:  # a close marker cut short by the token limit is markup, not text
                self._buffer = ""
                self._state = "text"
                return []
            self._buffer = stripped
            return []  # maybe the close marker, still arriving
        self._buffer = stripped
        self._state = "text"
        return []

    def _text(self, text: str) -> list[Delta]:
        if not text:
            return []
        if text.strip():
            self._at_start = False
        return [TextDelta(text)]


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
