"""Raw model text in, typed deltas out: text, reasoning, tool calls. One state machine.

`MarkupParser.feed(chunk)` takes whatever the tokenizer produced (markup may be split
anywhere across chunks) and returns the deltas that are certain so far; `close()` flushes
the rest at the end of generation. Text that might be the start of markup is held back
until it is known not to be, so `<think>`, `<tool_call>`, `[TOOL_CALLS]`, ... never reach
the client as text, not even for one chunk.

What differs between the formats is data: the call markup and how a call's body is read
(`Markup`, _spec.py: a name then JSON arguments, parameters or arguments of the format's own
syntax read whole, or a JSON object in any key order), the reasoning markup
(`ParseOptions.think`). The same rules for all: two markers at one offset, the longer is
read; the line breaks after a reasoning block or a turn's calls are the template's, not
text (spaces are kept: a marker may begin with one). No format has a parser of its own.
Without tools there are no call markers: what is left is the reasoning split (the upstream
engines' `<think>` spans). The text scanning it is built on is in _scan.py.

A call object's arguments stream as they are generated (once `"name"` and the start of
`"arguments"` are seen); one written in another key order is emitted whole when it closes.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from respond.engines._base import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines.formats._base import ParseOptions
from respond.engines.formats._scan import (
    Compact,
    JsonScanner,
    json_text,
    partial_suffix,
    reasoning_step,
)
from respond.engines.formats._spec import (
    CDATA_CLOSE,
    CDATA_OPEN,
    PLACEHOLDERS,
    Markup,
    WholeBody,
    is_string_schema,
    property_schema,
    split_slot,
)

__all__ = ["MarkupParser"]


# `{"name": "x", "arguments": ` at the start of a call object: from here on the
# arguments can be streamed as they come.
_HEADER = re.compile(
    r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)


State = Literal[
    "text",
    "start",
    "name",
    "name_rest",
    "json",
    "call_close",
    "params",
    "param_name",
    "param_value",
    "after_call",
    "object_open",
    "object",
    "object_close",
    "object_next",
]


class MarkupParser:
    """Raw model text in, deltas out, for one `Markup`. One instance per generated turn."""

    def __init__(self, markup: Markup, options: ParseOptions) -> None:
        self._m = markup
        self.body = markup.reader  # how a call is read (the machine is one for every format)
        self._tools = options.tools
        self._think = options.think
        self.in_reasoning = options.in_reasoning and options.think is not None
        self._new_call_id = options.new_call_id
        self.stop_at_call = options.stop_at_call
        self.halted_at: int | None = None
        self.fed = 0  # characters fed; the buffer starts at `fed - len(self._buffer)`
        self._buffer = markup.call_open if markup.opened else ""  # the prompt's, when opened
        self._state: State = "text"
        self._calls = 0  # calls begun
        self._name = ""
        self._named = False  # the current call's ToolCallStart is out
        self._scanner = JsonScanner()  # the current JSON value (a call object, or arguments)
        self._args = JsonScanner()  # a call object's arguments, within it
        self._keys = 0  # parameters of the current call emitted
        self._string = False  # the current parameter's value is a string
        self._value = ""  # a non-string parameter value, until it closes
        self._strip = False  # drop the line breaks before the next text
        self._spoke = False  # text other than whitespace is out
        self._reasoned = False  # the current reasoning block's text has begun
        self._written_id = ""  # the id the model wrote before the call's arguments
        # The current call's arguments while its id (written after them) is not yet read.
        self._held: list[str] | None = None
        self._compact = Compact()  # indented JSON arguments, passed on as `tojson` writes them
        self._wrapped: bool | None = None  # the current value is in CDATA (None: not read yet)
        # A call object (body "object"): its text so far, where its arguments begin in it
        # (once its name is read), and how much of them is out.
        self._object = ""
        self._args_from = 0
        self._args_sent = 0

    # ------------------------------------------------------------ public

    def feed(self, chunk: str) -> list[Delta]:
        if self.halted_at is not None:
            return []
        self.fed += len(chunk)
        self._buffer += chunk
        return self._run(final=False)

    def close(self) -> list[Delta]:
        if self.halted_at is not None:
            return []
        if self._partial_next_call():
            self._buffer = ""  # the start of a further call's marker, cut short
        out = self._run(final=True)
        unnamed = self._state == "object" and not self._named
        if self._state in ("start", "name", "name_rest", "object_open", "object_next") or (
            unnamed and not self._m.bare_start
        ):
            self._buffer = ""  # call markup cut short before its name: neither call nor text
        elif self._state == "object":  # named, or (Llama 3) maybe a plain JSON answer
            out += self._end_object(at_end=True)
        elif self._state == "param_value":
            out += self._end_value(self._buffer)
            out += self._end_call(at_end=True)
        elif self._state in ("json", "call_close", "params", "param_name"):
            out += self._end_call(at_end=True)
        if self._buffer.strip() and self._state == "text":
            out += self._text(self._buffer)
        self._buffer = ""
        return out

    @property
    def unnamed_call(self) -> bool:
        """A call's markup has begun, but not even its name is known yet."""
        opened = ("start", "name", "name_rest", "object_open", "object_next")
        if self._state in opened or (self._state == "object" and not self._named):
            return self.halted_at is None
        return self._partial_next_call()

    def _partial_next_call(self) -> bool:
        """After a call, the text held back is the start of another call's marker."""
        held = self._buffer.strip()
        if not held or not self._calls or self._tools is None:
            return False
        if self._state == "after_call":
            return split_slot(self._m.call_sep + self._m.call_open)[0].strip().startswith(held)
        return self._state == "text" and any(t.startswith(held) for t in self._m.trigger_markers())

    # ------------------------------------------------------------ states

    def _run(self, *, final: bool) -> list[Delta]:
        out: list[Delta] = []
        while True:
            before = (self._state, len(self._buffer), self.in_reasoning)
            out += self._step(final)
            if (self._state, len(self._buffer), self.in_reasoning) == before:
                return out

    def _step(self, final: bool) -> list[Delta]:
        if self.in_reasoning:
            return self._reasoning(final)
        return getattr(self, f"_on_{self._state}")(final)  # type: ignore[no-any-return]

    def _reasoning(self, final: bool) -> list[Delta]:
        assert self._think is not None
        ready, self._buffer, closed = reasoning_step(
            self._buffer, self._think.close, final=final, begun=self._reasoned
        )
        if closed:
            self.in_reasoning = False
            self._strip = True
        self._reasoned = not closed and (self._reasoned or bool(ready))
        return [ReasoningDelta(ready)] if ready else []

    def _on_text(self, final: bool) -> list[Delta]:
        if self._strip:  # the line breaks after a reasoning block or the calls are markup
            self._buffer = self._buffer.lstrip("\n")
            if not self._buffer:
                return []
            self._strip = False
        buffer = self._buffer
        if self._m.bare_start and self._tools is not None and not self._spoke and not self._calls:
            # A call written as the whole turn: a JSON object from the first character.
            stripped = buffer.lstrip()
            if stripped.startswith("{"):
                if self.stop_at_call:
                    self.halted_at = self.fed - len(stripped)
                    self._buffer = ""
                    return []
                self._buffer, self._state = stripped, "object"
                return []
        triggers = self._m.trigger_markers() if self._tools is not None else ()
        markers = [*triggers, *self._m.drops]
        if self._m.opened and self._tools is None:  # no calls: the opener heads a message
            markers.append(self._m.call_open)
        if self._think is not None:
            markers.append(self._think.open)
        found = [(buffer.find(m), m) for m in markers if m in buffer]
        if not found:
            keep = 0 if final else partial_suffix(buffer, tuple(markers))
            ready = buffer[: len(buffer) - keep]
            if not self._spoke and not ready.strip():
                return []  # held: markup if a marker comes next (below), else the text's
            self._buffer = buffer[len(ready) :]
            return self._text(ready)
        at, marker = min(found, key=lambda f: (f[0], -len(f[1])))  # the longest of the first
        if not final and any(
            len(m) > len(buffer) - at and m.startswith(buffer[at:]) for m in markers
        ):
            self._buffer = buffer[at:]  # maybe the start of a longer marker: wait for it
            return self._text(buffer[:at])
        # Whitespace before the first marker, with nothing said yet, is the template's
        # (the "\n" some write before a turn's calls), not text of the model's.
        said = buffer[:at]
        out = self._text(said if said.strip() or self._spoke else "")
        if marker in triggers:
            if self.stop_at_call:
                self.halted_at = self.fed - len(buffer) + at
                if self._m.opened:  # its grammar writes the call from the name on
                    self.halted_at += len(marker)
                self._buffer = ""
                return out
            self._buffer = buffer[at:]
            self._state = "start"
            return out
        self._buffer = buffer[at + len(marker) :]
        if self._think is not None and marker == self._think.open:
            self.in_reasoning = True
        return out

    def _on_start(self, final: bool) -> list[Delta]:
        taken, written = self._take_slotted(self._m.start, final)
        if taken is None:
            return []
        if not taken:  # a trigger that does not begin a call: the model's words after all
            self._state = "text"
            trigger = next(t for t in self._m.trigger_markers() if self._buffer.startswith(t))
            self._buffer = self._buffer[len(trigger) :]
            return self._text(trigger)
        self._begin_call(written)
        return []

    def _begin_call(self, written: str) -> None:
        self._state = "name" if self._m.body == "named" else "object_open"
        self._name = ""
        self._named = False
        self._keys = 0
        self._compact = Compact()
        self._written_id = written if "{id}" in self._m.call_open else ""

    def _on_name(self, final: bool) -> list[Delta]:
        head = self._m.slot()[0]
        if head:
            at = self._buffer.find(head)
        else:  # the name runs up to the first parameter or the end of the call (GLM 4.7)
            params = self._m.params
            ends = [self._m.call_close, params.open if params else ""]
            found = [self._buffer.find(e) for e in ends if e and e in self._buffer]
            at = min(found) if found else -1
        if at < 0:
            return []
        self._name = self._buffer[:at].strip()
        self._buffer = self._buffer[at + len(head) :]
        self._state = "name_rest"
        return []

    def _on_name_rest(self, final: bool) -> list[Delta]:
        _, placeholder, rest = self._m.slot()
        written = ""
        if placeholder == "{name}":  # the name again, then the rest
            rest = self._name + rest
        elif placeholder:
            pattern = PLACEHOLDERS[placeholder]
            found = re.match(pattern, self._buffer)
            assert found is not None
            if found.end() == len(self._buffer) and not final:
                return []
            written = self._buffer[: found.end()]
        held, self._buffer = self._buffer, self._buffer[len(written) :]
        taken = self._take(rest, final)
        if taken is None:
            self._buffer = held  # the placeholder's value is read again with the rest
            return []
        self._calls += 1
        self._named = True
        if placeholder == "{id}" and written:
            self._written_id = written
        out: list[Delta] = []
        if "{id}" in self._m.call_close:
            self._held = []  # the call starts once its id is read
        else:
            out.append(
                ToolCallStart(call_id=self._written_id or self._new_call_id(), name=self._name)
            )
        if self._m.params is None:
            self._state = "json"
            self._scanner = JsonScanner()
        else:
            self._state = "params"
            out += self._arguments("{")
        return out

    def _on_json(self, final: bool) -> list[Delta]:
        if self._m.whole is not None:
            return self._whole(self._m.whole, final)
        take = 0
        for char in self._buffer:
            if self._scanner.done or self._scanner.ends_scalar(char):
                self._scanner.done = True
                break
            self._scanner.push(char)
            take += 1
        text, self._buffer = self._buffer[:take], self._buffer[take:]
        if self._scanner.done:
            self._state = "call_close"
        return self._arguments(text) if text.strip() or (text and self._scanner.started) else []

    def _whole(self, whole: WholeBody, final: bool) -> list[Delta]:
        """Arguments of the format's own syntax, read once they are all there (or cut)."""
        end = whole.end(self._buffer)
        if end < 0 and not final:
            return []
        body = self._buffer if end < 0 else self._buffer[:end]
        self._buffer = "" if end < 0 else self._buffer[end:]
        self._state = "call_close"
        try:
            arguments = whole.read(body, self._tools.get(self._name) if self._tools else None)
        except (ValueError, IndexError):  # not arguments at all
            arguments = {}
        return [ToolCallArgumentsDelta(json.dumps(arguments, ensure_ascii=False))]

    def _on_call_close(self, final: bool) -> list[Delta]:
        taken, written = self._take_slotted(self._m.call_close, final)
        if taken is None:
            return []
        out = self._end_call(written, at_end=not taken)  # not taken: no close marker came
        if not taken:
            self._state = "text"
        return out

    def _end_call(self, written: str = "", at_end: bool = False) -> list[Delta]:
        out: list[Delta] = []
        if self._m.params is not None:
            out += self._arguments("}")
        if self._held is not None:  # its id came last: the whole call now
            call_id = written if "{id}" in self._m.call_close and written else ""
            start = ToolCallStart(call_id=call_id or self._new_call_id(), name=self._name)
            out = [start, ToolCallArgumentsDelta("".join(self._held))]
            self._held = None
        out.append(ToolCallEnd(at_end=at_end))
        self._named = False
        self._state = "after_call"
        return out

    def _on_after_call(self, final: bool) -> list[Delta]:
        m = self._m
        nxt = m.call_sep + m.call_open
        longer = [d for d in m.drops if len(d) > len(nxt) and d.startswith(nxt)]
        if any(self._buffer.startswith(d) for d in longer):  # the longer marker is read
            self._state = "text"
            return []
        if not final and any(d.startswith(self._buffer) for d in longer):
            return []  # maybe the longer marker, still arriving
        taken, written = self._take_slotted(nxt, final)
        if taken:
            self._begin_call(written)
            return []
        if m.section_close and self._buffer.startswith(m.section_close):
            self._buffer = self._buffer[len(m.section_close) :]
            self._state, self._strip = "text", True
            return []
        waiting = taken is None or bool(
            m.section_close and m.section_close.startswith(self._buffer)
        )
        if waiting and not final:
            return []
        self._state, self._strip = "text", True
        return []

    # ------------------------------------------------------------ call objects

    def _on_object_open(self, final: bool) -> list[Delta]:
        """Right after the marker: a call object, or a list of them."""
        stripped = self._buffer.lstrip()
        if not stripped:
            return []  # (whitespace: the words' or the markup's, not known yet)
        if self._m.call_sep == "," and stripped[0] == "[":
            self._buffer, self._state = stripped[1:], "object_next"
            return []
        if stripped[0] == "{":
            self._buffer = stripped
        self._state = "object"
        return []

    def _on_object_next(self, final: bool) -> list[Delta]:
        stripped = self._buffer.lstrip().lstrip(",").lstrip()
        self._buffer = stripped
        if not stripped:
            return []
        if stripped[0] == "]":
            self._buffer, self._state, self._strip = stripped[1:], "text", True
            return []
        self._state = "object"
        return []

    def _on_object(self, final: bool) -> list[Delta]:
        if not self._object and not self._buffer.lstrip().startswith("{"):
            return self._not_an_object(final)
        if not self._object:
            self._scanner = JsonScanner()
        consumed = 0
        for char in self._buffer:
            if self._scanner.done:
                break
            self._scanner.push(char)
            consumed += 1
        self._object += self._buffer[:consumed]
        self._buffer = self._buffer[consumed:]
        out = self._object_arguments()
        if self._scanner.done:
            out += self._end_object()
        return out

    def _object_arguments(self) -> list[Delta]:
        """The call's start once its name is read, then its arguments as far as written."""
        out: list[Delta] = []
        if not self._named:
            match = _HEADER.match(self._object)
            # Wait for the value's first character, so the whitespace before it is not sent.
            if match is None or match.end() == len(self._object):
                return out
            self._named, self._args_from, self._args_sent = True, match.end(), 0
            self._args = JsonScanner()
            name = json.loads(f'"{match.group(1)}"')
            out.append(ToolCallStart(call_id=self._new_call_id(), name=name))
        pending = self._object[self._args_from + self._args_sent :]
        take = 0
        for char in pending:
            if self._args.done or self._args.ends_scalar(char):
                self._args.done = True
                break
            self._args.push(char)
            take += 1
        if take:
            out.append(ToolCallArgumentsDelta(pending[:take]))
            self._args_sent += take
        return out

    def _end_object(self, at_end: bool = False) -> list[Delta]:
        text, named = self._object, self._named
        self._object, self._named = "", False
        self._calls += 1
        if self._m.call_sep == ",":  # a list, or objects written one after another
            self._state = "object_next"
        elif self._m.call_close:
            self._state = "object_close"
        else:
            self._state, self._strip = "text", True
        if named:
            return [ToolCallEnd(at_end=at_end)]
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("name"), str):  # not name-first
            arguments = data.get("arguments", data.get("parameters", {}))
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            return [
                ToolCallStart(call_id=self._new_call_id(), name=data["name"]),
                ToolCallArgumentsDelta(arguments),
                ToolCallEnd(),
            ]
        # Not a call after all (a Llama 3 turn that is plain JSON, or broken markup): the
        # content is the model's text; the markup around it is not.
        self._calls -= 1
        if not self._m.call_close:
            self._state, self._strip = "text", False
        return self._text(text)

    def _not_an_object(self, final: bool) -> list[Delta]:
        """Markup opened but no JSON object follows: keep the words, drop the markup."""
        close = self._m.call_close
        if not close:
            self._state = "text"
            return []
        end = self._buffer.find(close)
        if end < 0 and not final:
            return []
        body = self._buffer if end < 0 else self._buffer[:end]
        self._buffer = "" if end < 0 else self._buffer[end + len(close) :]
        self._state = "text"
        return self._text(body.strip())

    def _on_object_close(self, final: bool) -> list[Delta]:
        """The close marker after a call object, where the format writes one."""
        close, stripped = self._m.call_close, self._buffer.lstrip()
        if stripped.startswith(close):
            self._buffer, self._state, self._strip = stripped[len(close) :], "text", True
        elif close.startswith(stripped) and not final:
            self._buffer = stripped  # maybe the close marker, still arriving
        else:  # no close marker (one cut short by the token limit is markup, not text)
            cut = final and close.startswith(stripped)
            self._buffer, self._state = "" if cut else stripped, "text"
        return []

    # ------------------------------------------------------------ parameters

    def _on_params(self, final: bool) -> list[Delta]:
        params = self._m.params
        assert params is not None
        if self._buffer.startswith(params.open):
            self._buffer = self._buffer[len(params.open) :]
            self._state = "param_name"
            return []
        if params.open.startswith(self._buffer) and not final:
            return []  # maybe the next parameter, still arriving
        return self._on_call_close(final)

    def _on_param_name(self, final: bool) -> list[Delta]:
        read = self._param_name()
        if read is None:
            return []
        key, self._string = read
        self._state = "param_value"
        self._value = ""
        self._wrapped = None
        comma = ", " if self._keys else ""
        self._keys += 1
        head = f"{comma}{json.dumps(key, ensure_ascii=False)}: " + ('"' if self._string else "")
        return self._arguments(head)

    def _param_name(self) -> tuple[str, bool] | None:
        """The next parameter's key, and whether its value is a string (None: not all here)."""
        params = self._m.params
        assert params is not None
        if params.typed:  # the type after the key tells a string (written raw) from JSON
            before, _, after = params.name_close.partition("{type}")
            at = self._buffer.find(before)
            end = self._buffer.find(after, at + len(before)) if at >= 0 else -1
            if end < 0:
                return None
            key, kind = self._buffer[:at], self._buffer[at + len(before) : end]
            self._buffer = self._buffer[end + len(after) :]
            return key, kind == "string"
        closes = [params.name_close, params.json_name_close or ""]
        found = [(self._buffer.find(c), c) for c in closes if c and c in self._buffer]
        if not found:
            return None
        at, close = min(found)
        key = self._buffer[:at]
        self._buffer = self._buffer[at + len(close) :]
        if params.json_name_close is not None:
            return key, close == params.name_close
        return key, is_string_schema(property_schema(self._tools, self._name, key)) is True

    def _value_close(self, final: bool) -> str | None:
        """What ends the current value (None: not known until more text comes)."""
        params = self._m.params
        assert params is not None
        if params.cdata and self._wrapped is None:
            if self._buffer.startswith(CDATA_OPEN):
                self._buffer = self._buffer[len(CDATA_OPEN) :]
                self._wrapped = True
            elif CDATA_OPEN.startswith(self._buffer) and not final:
                return None  # maybe CDATA, still arriving
            else:
                self._wrapped = False
        return CDATA_CLOSE + params.close if self._wrapped else params.close

    def _on_param_value(self, final: bool) -> list[Delta]:
        close = self._value_close(final)
        if close is None:
            return []
        at = self._buffer.find(close)
        if at >= 0:
            value, self._buffer = self._buffer[:at], self._buffer[at + len(close) :]
            self._state = "params"
            return self._end_value(value)
        keep = 0 if final else partial_suffix(self._buffer, (close,))
        ready, self._buffer = (
            self._buffer[: len(self._buffer) - keep],
            self._buffer[len(self._buffer) - keep :],
        )
        if not ready:
            return []
        if self._string:
            return self._arguments(json.dumps(ready, ensure_ascii=False)[1:-1])
        self._value += ready
        return []

    def _end_value(self, rest: str) -> list[Delta]:
        if self._string:
            return self._arguments(json.dumps(rest, ensure_ascii=False)[1:-1] + '"')
        raw = (self._value + rest).strip()
        self._value = ""
        return self._arguments(json_text(raw, self._m.params))

    # ------------------------------------------------------------ helpers

    def _arguments(self, text: str) -> list[Delta]:
        if self._m.indented:
            text = self._compact.feed(text)
            if not text:
                return []
        if self._held is not None:
            self._held.append(text)
            return []
        return [ToolCallArgumentsDelta(text)]

    def _take_slotted(self, literal: str, final: bool) -> tuple[bool | None, str]:
        """`_take` for a literal with a placeholder; also what the model wrote there."""
        before, placeholder, after = split_slot(literal)
        if not placeholder:
            return self._take(literal, final), ""
        buffer = self._buffer
        if not buffer.startswith(before):
            return (None if before.startswith(buffer) and not final else False), ""
        found = re.match(PLACEHOLDERS[placeholder], buffer[len(before) :])
        assert found is not None
        rest = buffer[len(before) + found.end() :]
        if rest.startswith(after):
            self._buffer = rest[len(after) :]
            return True, found.group()
        if after.startswith(rest) and not final:
            return None, ""
        return False, ""

    def _take(self, literal: str, final: bool) -> bool | None:
        """Consume `literal` at the buffer's start: True; None: maybe, wait; False: not it."""
        if self._buffer.startswith(literal):
            self._buffer = self._buffer[len(literal) :]
            return True
        if literal.startswith(self._buffer) and not final:
            return None
        return False

    def _text(self, text: str) -> list[Delta]:
        self._spoke = self._spoke or bool(text.strip())
        return [TextDelta(text)] if text else []
