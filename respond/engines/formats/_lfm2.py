"""LFM2.5: Python calls, `<|tool_call_start|>[f(city='Paris', days=2), ...]<|tool_call_end|>`.

The template writes each argument its own way (its `format_arg_value`): a string between
single quotes as it is, not escaped; an object as JSON (`tojson`); anything else as Python
prints it (`True`, `None`, `['a', 'b']`: `| string`). The grammar writes exactly that, so a
string argument cannot hold a quote followed by `,` or `)` (where the template's text would
end it) nor end with a quote; the parser reads a call's arguments once its `)` has come.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
)
from respond.engines.formats._python import members, python_value, read_python
from respond.engines.formats._spec import Markup, WholeBody, is_string_schema
from respond.engines.formats._stream import MarkupParser

__all__ = ["LFM2"]

OPEN, CLOSE = "<|tool_call_start|>[", "]<|tool_call_end|>"
_JSON_WORDS = {"true": True, "false": False, "null": None}  # models write these too


def lfm_value(value: Any) -> str:
    """An argument's text, as the template writes it."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _scan(text: str, at: int, stops: str) -> int:
    """Where, from `at`, the first character of `stops` outside brackets and quoted
    strings (with escapes: repr's and JSON's) is; -1 if none."""
    depth, quote = 0, ""
    while at < len(text):
        char = text[at]
        if quote:
            if char == "\\":
                at += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            if depth == 0 and char in stops:
                return at
            depth -= 1
        elif depth == 0 and char in stops:
            return at
        at += 1
    return -1


def _raw_string_end(text: str, at: int) -> int:
    """The closing quote of a raw string opened before `at`: the first quote followed by
    `,` or `)` (or the end); -1 if none yet."""
    while True:
        at = text.find("'", at)
        if at < 0 or at + 1 == len(text) or text[at + 1] in ",)":
            return at
        at += 1


def arguments_end(text: str) -> int:
    """Where the `)` closing a call's arguments is in `text` (the arguments on), or -1."""
    at = 0
    while True:
        equals = _scan(text, at, "=)")
        if equals < 0 or text[equals] == ")":
            return equals
        at = equals + 1
        if text.startswith("'", at):
            end = _raw_string_end(text, at + 1)
            if end < 0 or end + 1 == len(text):
                return -1
            at = end + 1
        else:
            at = _scan(text, at, ",)")
            if at < 0:
                return -1
        if text[at] == ")":
            return at
        at += 1


def read_arguments(body: str) -> dict[str, Any]:
    """`k='v', n=2, ...` (the whole text between the call's parentheses) as a dict."""
    out: dict[str, Any] = {}
    at = 0
    while at < len(body):
        equals = body.index("=", at)
        key = body[at:equals].strip(" ,")
        at = equals + 1
        if body.startswith("'", at):
            end = _raw_string_end(body, at + 1)
            end = len(body) - 1 if end < 0 else end
            out[key], at = body[at + 1 : end], end + 1
            continue
        end = _scan(body, at, ",")
        end = len(body) if end < 0 else end
        out[key], at = _value(body[at:end].strip()), end
    return out


def _value(text: str) -> Any:
    """A value that is not a quoted string."""
    if text in _JSON_WORDS:
        return _JSON_WORDS[text]
    for read in (json.loads, read_python):  # an object is JSON, the rest Python's text
        try:
            return read(text)
        except ValueError:
            continue
    return text  # neither: the text as it was written


MARKUP = Markup(
    section_open=OPEN,
    call_open="",
    name_close="(",
    call_close=")",
    call_sep=", ",
    section_close=CLOSE,
    triggers=("<|tool_call_start|>",),
    whole=WholeBody("python-calls", arguments_end, lambda body, schema: read_arguments(body)),
)


class LfmFormat(ChatFormat):
    name = "lfm2.5"
    label = "lfm2.5 python calls [name(key=value)]"
    markers = ("<|tool_call_start|>", "format_arg_value")

    def render(self, calls: Sequence[ProbeCall]) -> str:
        written = [
            f"{c.name}(" + ", ".join(f"{k}={lfm_value(v)}" for k, v in c.arguments.items()) + ")"
            for c in calls
        ]
        return OPEN + ", ".join(written) + CLOSE

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        alternatives = [
            f'{kit.lit(name + "(")} {self._arguments(kit, schema, f"fn{n}")} ")"'
            for n, (name, schema) in enumerate(calls)
        ]
        call = kit.rule("call", " | ".join(alternatives))
        if max_calls is None:
            repeated = f'{call} ( ", " {call} )*'
        else:
            repeated = f"{call}" + f' ( ", " {call}' * (max_calls - 1) + " )?" * (max_calls - 1)
        return f"{kit.lit(OPEN)} {repeated} {kit.lit(CLOSE)}"

    def _arguments(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        properties = kit.properties(schema, name)
        if properties is None:  # any keys, any values
            kit.rule("lfm-key", "[A-Za-z_] [A-Za-z0-9_]*")
            pair = f'lfm-key "=" {self._value(kit, None, f"{name}-any")}'
            return kit.rule(f"{name}-args", f'( {pair} ( ", " {pair} )* )?')
        parts = [
            (f"{kit.lit(key + '=')} {self._value(kit, sub, f'{name}-p{n}')}", required)
            for n, (key, sub, required) in enumerate(properties)
        ]
        return members(kit, parts, kit.lit(", "), f"{name}-m")

    def _value(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        string = is_string_schema(schema)
        if string and schema is not None:
            choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
            if isinstance(choices, list):
                return "( " + " | ".join(kit.lit(f"'{c}'") for c in choices) + " )"
            raw = kit.raw_string(schema, name)
            return f'"\'" {raw} "\'"' if raw else self._string(kit)
        kinds = schema.get("type") if schema is not None else None
        if kinds == "object":
            return kit.json_value(schema, name)  # written with tojson
        if string is None or (isinstance(kinds, list) and "string" in kinds):
            others = [k for k in kinds if k != "string"] if isinstance(kinds, list) else None
            if others == []:
                return self._string(kit)
            if others and schema is not None:  # a string, or a value of the other types
                rest = python_value(kit, {**schema, "type": others}, name)
                return f"( {self._string(kit)} | {rest} )"
            # Any value: a string, an object (JSON), or another value.
            anything = python_value(kit, schema, name)
            obj = kit.json_value({"type": "object"}, "lfm-object")
            return f"( {self._string(kit)} | {obj} | {anything} )"
        return python_value(kit, schema, name)

    @staticmethod
    def _string(kit: GrammarKit) -> str:
        """A string between quotes, as it is: no quote in it followed by `,` or `)`."""
        return kit.rule("lfm-string", '"\'" ( [^\'] | "\'" [^,)] )* "\'"')

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(MARKUP, options)


LFM2 = LfmFormat()
