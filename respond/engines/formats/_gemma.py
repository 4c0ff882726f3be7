"""Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, its own value syntax.

Keys are bare and sorted (the template's `dictsort`), strings are wrapped in `<|"|>`,
booleans are `true`/`false`, None is `None`, lists are `[a,b]`, objects `{k:v}`; nothing
is spaced. Calls follow each other directly.
"""

from __future__ import annotations

import json
import re
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
from respond.engines.formats._spec import Markup, WholeBody, is_string_schema
from respond.engines.formats._stream import MarkupParser

__all__ = ["GEMMA_4"]

QUOTE = '<|"|>'
OPEN, CLOSE = "<|tool_call>call:", "}<tool_call|>"


def gemma_value(value: Any) -> str:
    """A value as Gemma 4's template writes it (format_argument, keys not escaped)."""
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "{" + gemma_pairs(value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(gemma_value(item) for item in value) + "]"
    return str(value)


def gemma_pairs(mapping: Mapping[str, Any]) -> str:
    return ",".join(f"{key}:{gemma_value(mapping[key])}" for key in sorted(mapping))


class _Reader:
    """Gemma 4's values back into Python ones (recursive descent over the text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def pairs(self, end: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self.at < len(self.text) and not self.text.startswith(end, self.at):
            colon = self.text.index(":", self.at)
            key = self.text[self.at : colon].strip().replace(QUOTE, "")
            self.at = colon + 1
            out[key] = self.value()
            if self.text.startswith(",", self.at):
                self.at += 1
        return out

    def value(self) -> Any:
        text = self.text
        if text.startswith(QUOTE, self.at):
            end = text.index(QUOTE, self.at + len(QUOTE))
            value = text[self.at + len(QUOTE) : end]
            self.at = end + len(QUOTE)
            return value
        if text.startswith("{", self.at):
            self.at += 1
            found = self.pairs("}")
            self.at += 1
            return found
        if text.startswith("[", self.at):
            self.at += 1
            items = []
            while not text.startswith("]", self.at):
                items.append(self.value())
                if text.startswith(",", self.at):
                    self.at += 1
            self.at += 1
            return items
        word = re.match(r"[^,}\]]*", text[self.at :])
        assert word is not None
        self.at += word.end()
        raw = word.group().strip()
        words = {"true": True, "false": False, "None": None, "null": None}
        if raw in words:
            return words[raw]
        try:
            return json.loads(raw)
        except ValueError:
            return raw


def _body_end(text: str) -> int:
    """Where the call's arguments end (at `}<tool_call|>` outside values), or -1."""
    depth, at, quoted = 0, 0, False
    while at < len(text):
        if text.startswith(QUOTE, at):
            quoted, at = not quoted, at + len(QUOTE)
            continue
        if not quoted:
            if depth == 0 and text.startswith(CLOSE, at):
                return at
            depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(text[at], 0)
        at += 1
    return -1


def _read(body: str, schema: Mapping[str, Any] | None) -> dict[str, Any]:
    return _Reader(body).pairs("\0")


MARKUP = Markup(
    call_open=OPEN,
    name_close="{",
    call_close=CLOSE,
    triggers=("<|tool_call>",),
    whole=WholeBody("gemma-values", _body_end, _read),
)


class GemmaFormat(ChatFormat):
    name = "gemma-4"
    label = "gemma 4 call:name{key:value}"
    markers = ("<|tool_call>", "<tool_call|>")
    think = Think("<|channel>thought\n", "<channel|>", "gemma thought channel")

    def render(self, calls: Sequence[ProbeCall]) -> str:
        return "".join(f"{OPEN}{c.name}{{{gemma_pairs(c.arguments)}}}<tool_call|>" for c in calls)

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        alternatives = []
        for index, (name, schema) in enumerate(calls):
            body = self._object_body(kit, schema, f"fn{index}", top=True)
            alternatives.append(f"{kit.lit(name + '{')} {body}")
        call = kit.rule("call", f"{kit.lit(OPEN)} ( {' | '.join(alternatives)} ) {kit.lit(CLOSE)}")
        if max_calls is None:
            return f"{call}+"
        return f"{call}" + f" ( {call}" * (max_calls - 1) + " )?" * (max_calls - 1)

    def _object_body(
        self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str, *, top: bool
    ) -> str:
        if top:
            properties = kit.properties(schema, name)
        elif schema is not None and isinstance(schema.get("properties"), Mapping):
            required = set(schema.get("required", ()))
            properties = [(k, v, k in required) for k, v in schema["properties"].items()]
        else:
            properties = None
        if properties is None:
            return self._any_pairs(kit)
        items = sorted(properties, key=lambda p: p[0])
        parts = [
            f"{kit.lit(key + ':')} {self._value(kit, sub, f'{name}-{n}')}"
            for n, (key, sub, _) in enumerate(items)
        ]
        optional = [not required for _, _, required in items]
        # first(i): the first item written is one of i.. (those before it optional);
        # rest(i): after an item, "," and the next, or the end.
        count = len(parts)
        for i in range(count, -1, -1):
            first, rest = [], []
            for j in range(i, count):
                first.append(f"{parts[j]} {name}-r{j + 1}")
                rest.append(f'"," {parts[j]} {name}-r{j + 1}')
                if not optional[j]:
                    break
            else:
                first.append('""')
                rest.append('""')
            kit.rule(f"{name}-f{i}", " | ".join(first))
            kit.rule(f"{name}-r{i}", " | ".join(rest))
        return f"{name}-f0"

    def _value(self, kit: GrammarKit, schema: Mapping[str, Any], name: str) -> str:
        kind = schema.get("type")
        if is_string_schema(schema):
            choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
            if isinstance(choices, list):
                return "( " + " | ".join(kit.lit(QUOTE + str(c) + QUOTE) for c in choices) + " )"
            raw = kit.raw_string(schema, name)
            if raw is not None:
                return f"{kit.lit(QUOTE)} {raw} {kit.lit(QUOTE)}"
            return self._string(kit)
        if kind == "boolean":
            return '( "true" | "false" )'
        if kind == "null":
            return '"None"'
        if kind in ("integer", "number"):
            return kit.json_value(schema, name)
        if kind == "array" and isinstance(schema.get("items"), Mapping):
            item = self._value(kit, schema["items"], f"{name}-i")
            return f'"[" ( {item} ( "," {item} )* )? "]"'
        if kind == "object" and isinstance(schema.get("properties"), Mapping):
            return f'"{{" {self._object_body(kit, schema, name, top=False)} "}}"'
        return self._any(kit)

    def _string(self, kit: GrammarKit) -> str:
        text = kit.text_until(QUOTE, "gemma-str")
        return kit.rule("gemma-string", f"{kit.lit(QUOTE)} {text} {kit.lit(QUOTE)}")

    def _any(self, kit: GrammarKit) -> str:
        """Any value, and any keys (not sorted: a value whose schema says nothing)."""
        number = kit.json_value({"type": "number"}, "gemma-num")
        kit.rule("gemma-key", "[A-Za-z0-9_]+")
        kit.rule("gemma-pairs", '( gemma-key ":" gemma-any ( "," gemma-key ":" gemma-any )* )?')
        return kit.rule(
            "gemma-any",
            f'{self._string(kit)} | {number} | "true" | "false" | "None" | "{{" gemma-pairs "}}" '
            '| "[" ( gemma-any ( "," gemma-any )* )? "]"',
        )

    def _any_pairs(self, kit: GrammarKit) -> str:
        self._any(kit)
        return "gemma-pairs"

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(MARKUP, options)


GEMMA_4 = GemmaFormat()
