"""MiniMax M3: arguments as nested XML, every tag behind the namespace token `]<]minimax[>[`.

    NS<tool_call>
    NS<invoke name="f">NS<city>Paris</city>NS<tags>NS<item>a NS</item>NS</tags>NS</invoke>
    NS</tool_call>

(NS written before each tag, and before each closing tag.) Each parameter is closed by its
own name; an object's keys are tags, a list's items `<item>` tags; a string is written as it
is, a boolean as `true`/`false`, a number as Python prints it; a null is left out, as the
template leaves it out. The grammar writes that under the schema (a free object's closing
tags are not checked against their opening ones: a grammar cannot match any name); the
parser reads a call once its `</invoke>` has come, with the schema to tell `2` the string
from `2` the number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
    Think,
)
from respond.engines.formats._python import members
from respond.engines.formats._spec import Markup, WholeBody, is_string_schema
from respond.engines.formats._stream import MarkupParser

__all__ = ["MINIMAX_M3"]

NS = "]<]minimax[>["
END = NS + "</invoke>"


def to_xml(value: Any) -> str:
    """A value as the template's `to_xml` writes it."""
    if isinstance(value, Mapping):
        return "".join(f"{NS}<{k}>{to_xml(v)}{NS}</{k}>" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "".join(f"{NS}<item>{to_xml(item)}{NS}</item>" for item in value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class _Node:
    key: str
    text: str = ""
    children: list[_Node] = field(default_factory=list)


_TAG = re.compile(r"<(/?)([^<>]*)>")


def read_tags(body: str) -> tuple[list[_Node], int] | None:
    """The tags of a call's arguments and where its own `</invoke>` begins (None: it has
    not come yet)."""
    top = _Node("invoke")
    stack = [top]
    at = body.find(NS)
    while at >= 0:
        after = body.find(NS, at + len(NS))
        piece = body[at + len(NS) : after if after >= 0 else len(body)]
        tag = _TAG.match(piece)
        if tag is None:  # not a tag: the text of the open one goes on
            stack[-1].text += NS + piece
        elif not tag.group(1):
            node = _Node(tag.group(2), piece[tag.end() :])
            stack[-1].children.append(node)
            stack.append(node)
        elif len(stack) == 1:  # the call's own </invoke>
            return top.children, at
        else:
            stack.pop()
        at = after
    return None


def _value(node: _Node, schema: Mapping[str, Any] | None) -> Any:
    kinds = _kinds(schema)
    if node.children:
        if "array" in kinds and ("object" not in kinds or _items_only(node)):
            items = schema.get("items") if isinstance(schema, Mapping) else None
            return [
                _value(child, items if isinstance(items, Mapping) else None)
                for child in node.children
            ]
        if not kinds and _items_only(node):
            return [_value(child, None) for child in node.children]
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        return {child.key: _value(child, _sub(properties, child.key)) for child in node.children}
    return _scalar(node.text, kinds)


def _kinds(schema: Mapping[str, Any] | None) -> list[str]:
    if is_string_schema(schema):
        return ["string"]
    kinds = schema.get("type") if isinstance(schema, Mapping) else None
    return [kinds] if isinstance(kinds, str) else list(kinds) if isinstance(kinds, list) else []


def _items_only(node: _Node) -> bool:
    return all(child.key == "item" for child in node.children)


def _sub(properties: Any, key: str) -> Mapping[str, Any] | None:
    sub = properties.get(key) if isinstance(properties, Mapping) else None
    return sub if isinstance(sub, Mapping) else None


def _scalar(text: str, kinds: list[str]) -> Any:
    """A value without tags: the first of the schema's types its text is (a string if none
    is; any JSON scalar where the schema says nothing)."""
    if kinds == ["string"]:
        return text
    if not text and "array" in kinds:
        return []
    if not text and "object" in kinds:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return text
    wanted = {"integer": int, "number": int | float, "boolean": bool}
    if not kinds or any(
        isinstance(found, wanted[k]) and (k == "boolean") == isinstance(found, bool)
        for k in kinds
        if k in wanted
    ):
        return found if not isinstance(found, list | dict) else text
    return text


def _end(body: str) -> int:
    found = read_tags(body)
    return -1 if found is None else found[1]


def _read(body: str, schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments of a call's tags (cut short: the tags there are, closed)."""
    nodes = (read_tags(body + END) or ([], 0))[0]
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return {node.key: _value(node, _sub(properties, node.key)) for node in nodes}


MARKUP = Markup(
    section_open=NS + "<tool_call>\n",
    call_open=NS + '<invoke name="',
    name_close='">',
    call_close=END + "\n",
    section_close=NS + "</tool_call>",
    triggers=(NS + "<tool_call>",),
    drops=("</mm:think>",),  # what the template writes for a turn without reasoning
    whole=WholeBody("nested-xml", _end, _read),
)


class MiniMaxM3Format(ChatFormat):
    name = "minimax-m3"
    label = "minimax m3 nested xml"
    markers = (NS, "to_xml")
    think = Think("<mm:think>", "</mm:think>", "minimax think tags")

    def render(self, calls: Sequence[ProbeCall]) -> str:
        written = "".join(
            f'{NS}<invoke name="{c.name}">{to_xml(dict(c.arguments))}{END}\n' for c in calls
        )
        return MARKUP.section_open + written + MARKUP.section_close

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        alternatives = [
            f"{kit.lit(MARKUP.call_open + name + MARKUP.name_close)} "
            f"{self._members(kit, schema, f'fn{n}')} {kit.lit(MARKUP.call_close)}"
            for n, (name, schema) in enumerate(calls)
        ]
        call = kit.rule("call", " | ".join(alternatives))
        if max_calls is None:
            repeated = f"{call}+"
        else:
            repeated = f"{call}" + f" ( {call}" * (max_calls - 1) + " )?" * (max_calls - 1)
        return f"{kit.lit(MARKUP.section_open)} {repeated} {kit.lit(MARKUP.section_close)}"

    def _members(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        """An object's keys, each a tag around its value, in the schema's order."""
        if schema is None or not isinstance(schema.get("properties"), Mapping):
            return self._any_object(kit)
        required = set(schema.get("required", ()))
        parts = []
        for n, (key, sub) in enumerate(schema["properties"].items()):
            value = self._value(kit, sub if isinstance(sub, Mapping) else None, f"{name}-{n}")
            if value is not None:  # a null is never written
                tag = f"{kit.lit(f'{NS}<{key}>')} {value} {kit.lit(f'{NS}</{key}>')}"
                parts.append((tag, key in required))
        return members(kit, parts, '""', f"{name}-m")

    def _value(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str | None:
        """A value's rule (None: only null, which the template leaves out)."""
        if schema is None:
            return self._any(kit)
        choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
        if isinstance(choices, list):
            written = [kit.lit(to_xml(c)) for c in choices if c is not None]
            return "( " + " | ".join(written) + " )" if written else None
        kinds = schema.get("type")
        for combinator in ("anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                options = [
                    self._value(kit, o, f"{name}-{n}") for n, o in enumerate(schema[combinator])
                ]
                found = [o for o in options if o is not None]
                return "( " + " | ".join(found) + " )" if found else None
        if isinstance(kinds, list):
            options = [self._value(kit, {**schema, "type": k}, f"{name}-{k}") for k in kinds]
            found = [o for o in options if o is not None]
            return "( " + " | ".join(found) + " )" if found else None
        if is_string_schema(schema):
            return kit.raw_string(schema, name) or self._text(kit)
        if kinds == "null":
            return None
        if kinds == "boolean":
            return '( "true" | "false" )'
        if kinds in ("integer", "number"):
            return kit.json_value(schema, name)
        if kinds == "array":
            items = schema.get("items")
            item = self._value(kit, items if isinstance(items, Mapping) else None, f"{name}-i")
            if item is None:
                return '""'
            return f"( {kit.lit(f'{NS}<item>')} {item} {kit.lit(f'{NS}</item>')} )*"
        if kinds == "object":
            return self._members(kit, schema, name)
        return self._any(kit)

    @staticmethod
    def _text(kit: GrammarKit) -> str:
        return kit.text_until(NS, "m3-text")

    def _any_object(self, kit: GrammarKit) -> str:
        self._any(kit)
        return "m3-tags"

    def _any(self, kit: GrammarKit) -> str:
        """Any value: text, or tags around values (their closing names not checked)."""
        kit.rule("m3-key", "[A-Za-z0-9_.-]+")
        kit.rule(
            "m3-tags", f'( {kit.lit(NS + "<")} m3-key ">" m3-any {kit.lit(NS + "</")} m3-key ">" )*'
        )
        return kit.rule("m3-any", f"{self._text(kit)} | m3-tags")

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(MARKUP, options)


MINIMAX_M3 = MiniMaxM3Format()
