"""`Markup` written out: the text a turn of calls is (`render`) and the GBNF that writes it.

The markup itself (the data) is in _spec.py, its parser in _stream.py.
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
    Think,
)
from respond.engines.formats._spec import (
    CALL_ID_CHARS,
    Markup,
    Params,
    fill,
    is_string_schema,
    split_slot,
)
from respond.engines.formats._stream import MarkupParser

__all__ = ["MarkupFormat"]

MAX_INDEXED_CALLS = 8  # formats that number their calls: that many, written out in the grammar


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

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(self.markup, options)


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
