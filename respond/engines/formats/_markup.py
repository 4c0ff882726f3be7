"""Formats that write calls between markers: a name, then JSON arguments or XML parameters.

Most families fit one of two shapes, told apart by `Markup.params`:

- JSON arguments (DeepSeek V3.1, Kimi K2, Mistral v11, gpt-oss...)::

      section_open call_open NAME name_close {"k": "v"} call_close [call_sep ...] section_close

- parameters, one per argument (Qwen3-Coder, GLM, MiniMax, Seed-OSS...)::

      section_open call_open NAME name_close
        params.open KEY params.name_close VALUE params.close ...
      call_close [call_sep ...] section_close

  A string VALUE is written raw; any other value as JSON (or, `scalars="python"`, as
  Jinja's `| string` writes a scalar: True, None).

`call_open`, `name_close` and `call_close` may each hold one placeholder: `{i}`, the call's
index in the turn (Kimi K2, Cohere), `{n}` the same from 1 (Kimi K3); `{name}` (in
`name_close`), the function's name written a second time (muse-glimmer names it in the message
header and again in the call); `{id}`, its id, written
by the model (nine letters and digits, the shape Mistral's templates want) and taken as the
call's id, so that the history renders the call as it was written. An id written after the
arguments (Mistral Nemo, Apriel) holds the call back until it is read: its arguments come in
one piece.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from respond.engines._base import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines._parsing import JsonScanner, partial_suffix, reasoning_step
from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
    Think,
    ToolSchemas,
)

__all__ = ["Markup", "MarkupFormat", "Params"]

MAX_INDEXED_CALLS = 8  # formats that number their calls: that many, written out in the grammar


@dataclass(frozen=True)
class Params:
    open: str
    name_close: str  # after the key of a string value (of every value, without json_name_close)
    close: str
    json_name_close: str | None = None  # after the key of a non-string value (DeepSeek DSML)
    scalars: Literal["json", "python"] = "json"


@dataclass(frozen=True)
class Markup:
    call_open: str
    name_close: str
    call_close: str
    call_sep: str = ""
    section_open: str = ""
    section_close: str = ""
    params: Params | None = None
    # What starts a call when the model writes freely (default: the section's opening marker,
    # or the call's).
    triggers: tuple[str, ...] = ()
    # Markup that is neither text nor a call (a channel header): dropped from the text.
    drops: tuple[str, ...] = ()

    @property
    def start(self) -> str:
        return self.section_open + self.call_open

    def trigger_markers(self) -> tuple[str, ...]:
        return self.triggers or (split_slot(self.section_open or self.call_open)[0].strip(),)

    def slot(self) -> tuple[str, str, str]:
        """`name_close` around its placeholder: (before, placeholder, after)."""
        return split_slot(self.name_close)

    @property
    def indexed(self) -> bool:
        parts = (self.call_open, self.name_close, self.call_close)
        return any(p in part for part in parts for p in ("{i}", "{n}"))


def fill(text: str, index: int, call_id: str | None = None, name: str = "") -> str:
    """`text` with its placeholder written for the call at `index` (of function `name`)."""
    call_id = call_id or f"call{index:05d}"
    text = text.replace("{i}", str(index)).replace("{n}", str(index + 1))
    return text.replace("{id}", call_id).replace("{name}", name)


def split_slot(text: str) -> tuple[str, str, str]:
    """`text` around its placeholder: (before, placeholder, after)."""
    for placeholder in PLACEHOLDERS:
        before, found, after = text.partition(placeholder)
        if found:
            return before, found, after
    return text, "", ""


# What the model may write in each placeholder ({name}: the name it wrote before, again).
PLACEHOLDERS = {"{i}": r"\d*", "{n}": r"\d*", "{id}": r"[A-Za-z0-9]*", "{name}": ""}


CALL_ID_CHARS = 9  # Mistral's templates refuse any other call id


def is_string_schema(schema: Mapping[str, Any] | None) -> bool | None:
    """Whether values under `schema` are strings (None: cannot tell)."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("type") == "string":
        return True
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(choices, list) and choices:
        return all(isinstance(choice, str) for choice in choices)
    if "type" in schema:
        return False
    return None


def _property(tools: ToolSchemas, name: str, key: str) -> Mapping[str, Any] | None:
    schema = tools.get(name) if tools else None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    sub = properties.get(key) if isinstance(properties, Mapping) else None
    return sub if isinstance(sub, Mapping) else None


def _python_scalar(value: Any) -> str:
    return str(value)  # Jinja's `| string`: True, None, 2, 2.5


class MarkupFormat(ChatFormat):
    def __init__(
        self,
        name: str,
        label: str,
        markup: Markup,
        *,
        markers: tuple[str, ...],
        think: Think | None = None,
        single: bool = False,
    ) -> None:
        self.single = single
        self.name = name
        self.label = label
        self.markup = markup
        self.markers = markers
        self.think = think

    # ------------------------------------------------------------ rendering

    def render(self, calls: Sequence[ProbeCall]) -> str:
        m = self.markup
        parts = []
        for index, call in enumerate(calls[:1] if self.single else calls):
            body = fill(m.call_open, index, call.call_id) + call.name
            body += fill(m.name_close, index, call.call_id, call.name)
            if m.params is None:
                body += json.dumps(call.arguments, ensure_ascii=False)
            else:
                for key, value in call.arguments.items():
                    body += self._param(m.params, key, value)
            parts.append(body + fill(m.call_close, index, call.call_id))
        return m.section_open + m.call_sep.join(parts) + m.section_close

    @staticmethod
    def _param(params: Params, key: str, value: Any) -> str:
        if isinstance(value, str):
            return params.open + key + params.name_close + value + params.close
        close = params.json_name_close or params.name_close
        if params.scalars == "python" and not isinstance(value, (dict, list)):
            text = _python_scalar(value)
        else:
            text = json.dumps(value, ensure_ascii=False)
        return params.open + key + close + text + params.close

    # ------------------------------------------------------------ grammar

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        m = self.markup
        max_calls = 1 if self.single else max_calls
        bodies = [
            self._arguments_rule(kit, schema, f"fn{i}") for i, (_, schema) in enumerate(calls)
        ]
        if not m.indexed:
            call = kit.rule("call", self._call_body(kit, calls, bodies, 0))
            repeated = _repeat(call, kit.lit(m.call_sep), max_calls)
        else:  # each call written out with its index
            count = min(max_calls or MAX_INDEXED_CALLS, MAX_INDEXED_CALLS)
            rules = [
                kit.rule(f"call{n}", self._call_body(kit, calls, bodies, n)) for n in range(count)
            ]
            repeated = rules[-1]
            for rule in reversed(rules[:-1]):
                repeated = f"{rule} ( {kit.lit(m.call_sep)} {repeated} )?"
        return f"{kit.lit(m.section_open)} {repeated} {kit.lit(m.section_close)}"

    def _call_body(
        self, kit: GrammarKit, calls: Sequence[tuple[str, Any]], bodies: list[str], index: int
    ) -> str:
        m = self.markup
        heads = [
            f"{kit.lit(name)} {_slotted(kit, m.name_close.replace('{name}', name), index)}"
            for name, _ in calls
        ]
        alternatives = [f"{head} {body}" for head, body in zip(heads, bodies, strict=True)]
        opened, closed = _slotted(kit, m.call_open, index), _slotted(kit, m.call_close, index)
        return f"{opened} ( {' | '.join(alternatives)} ) {closed}"

    def _arguments_rule(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        params = self.markup.params
        if params is None:
            return kit.json_value(schema, name)
        properties = kit.properties(schema, name)
        if properties is None:  # any keys: each value written raw
            key = kit.rule(f"{name}-key", "[A-Za-z0-9_.-]+")
            value = kit.text_until(params.close, f"{name}-raw")
            opened, named = kit.lit(params.open), kit.lit(params.name_close)
            one = f"{opened} {key} {named} {value} {kit.lit(params.close)}"
            return kit.rule(f"{name}-args", f"( {one} )*")
        parts = []
        for n, (key, sub, required) in enumerate(properties):
            part = self._param_rule(kit, params, key, sub, f"{name}-p{n}")
            parts.append(part if required else f"( {part} )?")
        return kit.rule(f"{name}-args", " ".join(parts) or '""')

    def _param_rule(
        self, kit: GrammarKit, params: Params, key: str, sub: Mapping[str, Any], name: str
    ) -> str:
        kinds = sub.get("type")
        if isinstance(kinds, list) and "string" in kinds and len(kinds) > 1:
            # A string is written raw, a value of the other types as the others are.
            others = [kind for kind in kinds if kind != "string"]
            typed = {**sub, "type": others[0] if len(others) == 1 else others}
            as_string = self._param_rule(kit, params, key, {**sub, "type": "string"}, f"{name}-s")
            return f"( {as_string} | {self._param_rule(kit, params, key, typed, f'{name}-o')} )"
        string = is_string_schema(sub)
        close = (
            params.name_close
            if string or params.json_name_close is None
            else params.json_name_close
        )
        head = kit.lit(params.open + key + close)
        if string:
            choices = sub.get("enum", [sub["const"]] if "const" in sub else None)
            if isinstance(choices, list):
                value = "( " + " | ".join(kit.lit(str(c)) for c in choices) + " )"
            else:
                value = kit.raw_string(sub, name) or kit.text_until(params.close, f"{name}-raw")
        elif params.scalars == "python" and sub.get("type") == "boolean":
            value = '( "True" | "False" )'
        elif params.scalars == "python" and sub.get("type") == "null":
            value = '"None"'
        else:
            value = kit.json_value(sub, name)
        return f"{head} {value} {kit.lit(params.close)}"

    # ------------------------------------------------------------ parsing

    def _parser_type(self) -> type[MarkupParser]:
        """The parser of this markup; a variant with its own parameter syntax names its own."""
        return MarkupParser

    def reader(self, options: ParseOptions) -> StreamParser:
        return self._parser_type()(self.markup, options)


def _slotted(kit: GrammarKit, text: str, index: int) -> str:
    """GBNF for `text` with its placeholder: the index written out, any id of the shape."""
    before, placeholder, after = split_slot(text)
    if placeholder != "{id}":
        return kit.lit(fill(text, index))
    call_id = kit.rule("call-id", f"[A-Za-z0-9]{{{CALL_ID_CHARS}}}")
    return f"{kit.lit(before)} {call_id} {kit.lit(after)}"


def _repeat(rule: str, separator: str, upto: int | None) -> str:
    if upto is None:
        return f"{rule} ( {separator} {rule} )*"
    return f"{rule}" + f" ( {separator} {rule}" * (upto - 1) + " )?" * (upto - 1)


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
]


class MarkupParser:
    """Raw model text in, deltas out, for one `Markup`. One instance per generated turn."""

    def __init__(self, markup: Markup, options: ParseOptions) -> None:
        self._m = markup
        self._tools = options.tools
        self._think = options.think
        self.in_reasoning = options.in_reasoning and options.think is not None
        self._new_call_id = options.new_call_id
        self.stop_at_call = options.stop_at_call
        self._after_block = options.after_block
        self.halted_at: int | None = None
        self.fed = 0
        self._buffer = ""
        self._state: State = "text"
        self._calls = 0  # calls begun
        self._name = ""
        self._named = False  # the current call's ToolCallStart is out
        self._scanner = JsonScanner()
        self._keys = 0  # parameters of the current call emitted
        self._string = False  # the current parameter's value is a string
        self._value = ""  # a non-string parameter value, until it closes
        self._strip = False  # drop whitespace before the next text
        self._spoke = False  # text other than whitespace is out
        self._reasoned = False  # the current reasoning block's text has begun
        self._written_id = ""  # the id the model wrote before the call's arguments
        # The current call's arguments while its id (written after them) is not yet read.
        self._held: list[str] | None = None

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
        out = self._run(final=True)
        if self._state in ("start", "name", "name_rest") or self._partial_next_call():
            self._buffer = ""  # call markup cut short before its name: neither call nor text
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
        if self._state in ("start", "name", "name_rest"):
            return self.halted_at is None
        return self._partial_next_call()

    def _partial_next_call(self) -> bool:
        held = self._buffer.strip()
        nxt = split_slot(self._m.call_sep + self._m.call_open)[0].strip()
        return self._state == "after_call" and bool(held) and nxt.startswith(held)

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
            self._buffer = self._buffer.lstrip(self._after_block)
            if not self._buffer:
                return []
            self._strip = False
        buffer = self._buffer
        triggers = self._m.trigger_markers() if self._tools is not None else ()
        markers = [*triggers, *self._m.drops]
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
        self._state = "name"
        self._name = ""
        self._named = False
        self._keys = 0
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
        comma = ", " if self._keys else ""
        self._keys += 1
        head = f"{comma}{json.dumps(key, ensure_ascii=False)}: " + ('"' if self._string else "")
        return self._arguments(head)

    def _param_name(self) -> tuple[str, bool] | None:
        """The next parameter's key, and whether its value is a string (None: not all here)."""
        params = self._m.params
        assert params is not None
        closes = [params.name_close, params.json_name_close or ""]
        found = [(self._buffer.find(c), c) for c in closes if c and c in self._buffer]
        if not found:
            return None
        at, close = min(found)
        key = self._buffer[:at]
        self._buffer = self._buffer[at + len(close) :]
        if params.json_name_close is not None:
            return key, close == params.name_close
        return key, is_string_schema(_property(self._tools, self._name, key)) is True

    def _value_close(self, final: bool) -> str | None:
        """What ends the current value (None: not known until more text comes)."""
        assert self._m.params is not None
        return self._m.params.close

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
        return self._arguments(self._value_json(raw))

    def _value_json(self, raw: str) -> str:
        """A non-string value's text as JSON."""
        return _json_text(raw, self._m.params)

    # ------------------------------------------------------------ helpers

    def _arguments(self, text: str) -> list[Delta]:
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


_PYTHON = {"True": "true", "False": "false", "None": "null"}


def _json_text(raw: str, params: Params | None) -> str:
    """A non-string parameter value as JSON (a string when it is not JSON after all)."""
    if params is not None and params.scalars == "python" and raw in _PYTHON:
        return _PYTHON[raw]
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except ValueError:
        return json.dumps(raw, ensure_ascii=False)
