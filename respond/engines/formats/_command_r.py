"""Command R+: `Action:` and the calls as a JSON list, indented as `tojson(indent=4)` writes it.

    \\nAction:\\n```json\\n[\\n    {\\n        "tool_name": "f",\\n        "parameters": {
                "city": "Paris"\\n        }\\n    }\\n]```\\n

The template writes each call's object by hand and its parameters with
`tojson(indent=4) | indent(8)`: one key or item a line, four more spaces a level, `{}` and
`[]` when empty. The grammar writes that exactly: respond's own rules for objects and lists
(a level deeper, four spaces more), llama.cpp's converter for the values inside them (a
scalar is the same text indented or not); a value whose schema says nothing nests at most
MAX_DEPTH levels. The parser passes the arguments on as compact JSON (`tojson`'s spacing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines.formats._base import GrammarKit, ProbeCall
from respond.engines.formats._markup import MarkupFormat
from respond.engines.formats._python import members
from respond.engines.formats._spec import Markup

__all__ = ["COMMAND_R_PLUS"]

BASE = 8  # the parameters' object opens on a line indented by 8 (its keys by 12)
MAX_DEPTH = 6  # levels of a value whose schema says nothing


def indented(value: Any, base: int = BASE) -> str:
    """`value` as the template writes it on a line indented by `base`."""
    return json.dumps(value, indent=4, ensure_ascii=False).replace("\n", "\n" + " " * base)


def _line(base: int) -> str:
    return "\n" + " " * base


class CommandRPlusFormat(MarkupFormat):
    def render(self, calls: Sequence[ProbeCall]) -> str:
        m = self.markup
        written = [
            m.call_open + c.name + m.name_close + indented(dict(c.arguments)) + m.call_close
            for c in calls
        ]
        return m.section_open + m.call_sep.join(written) + m.section_close

    def _arguments_rule(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        properties = kit.properties(schema, name)
        if properties is None:
            return self._any(kit, BASE, "object")
        return self._object(kit, [(k, s, r) for k, s, r in properties], BASE, name)

    def _value(self, kit: GrammarKit, schema: Any, base: int, name: str) -> str:
        if not isinstance(schema, Mapping):
            return self._any(kit, base)
        choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
        if isinstance(choices, list):
            return "( " + " | ".join(kit.lit(indented(c, base)) for c in choices) + " )"
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                found = [self._value(kit, o, base, f"{name}-{n}") for n, o in enumerate(options)]
                return "( " + " | ".join(found) + " )"
        kind = schema.get("type")
        if isinstance(kind, list):
            found = [self._value(kit, {**schema, "type": k}, base, f"{name}-{k}") for k in kind]
            return "( " + " | ".join(found) + " )"
        if kind == "object":
            listed = schema.get("properties")
            if not isinstance(listed, Mapping):
                return self._any(kit, base, "object")
            required = set(schema.get("required", ()))
            return self._object(kit, [(k, s, k in required) for k, s in listed.items()], base, name)
        if kind == "array":
            return self._array(kit, schema, base, name)
        if kind is None and "properties" not in schema and "items" not in schema:
            return self._any(kit, base)
        return kit.json_value(schema, name)  # a scalar: the same text at any depth

    def _object(
        self, kit: GrammarKit, properties: list[tuple[str, Any, bool]], base: int, name: str
    ) -> str:
        inner = _line(base + 4)
        parts = [
            (
                f"{kit.lit(inner + json.dumps(key, ensure_ascii=False) + ': ')} "
                f"{self._value(kit, sub, base + 4, f'{name}-{n}')}",
                required,
            )
            for n, (key, sub, required) in enumerate(properties)
        ]
        if not parts:
            return '"{}"'
        written = members(kit, parts, '","', f"{name}-m", empty=False)
        closed = f"{written} {kit.lit(_line(base) + '}')}"
        if any(required for _, required in parts):
            return f'"{{" {closed}'
        return f'"{{" ( {closed} | "}}" )'

    def _array(self, kit: GrammarKit, schema: Mapping[str, Any], base: int, name: str) -> str:
        item = self._value(kit, schema.get("items"), base + 4, f"{name}-i")
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        low = low if isinstance(low, int) and low > 0 else 0
        high = high if isinstance(high, int) and high >= max(low, 1) else None
        first = f"{kit.lit(_line(base + 4))} {item}"
        upper = "" if high is None else str(high - 1)
        more = f'( "," {first} ){{{max(low - 1, 0)},{upper}}}' if high != 1 else ""
        listed = f'"[" {first} {more} {kit.lit(_line(base) + "]")}'
        return listed if low else f'( {listed} | "[]" )'

    def _any(self, kit: GrammarKit, base: int, only: str | None = None) -> str:
        """Any value (`only`: of that JSON type) on a line indented by `base`; containers
        nest MAX_DEPTH levels below the parameters at most."""
        name = f"cr-any{base}" + (f"-{only}" if only else "")
        scalar = kit.json_value({"type": ["string", "number", "boolean", "null"]}, "cr-scalar")
        key = kit.json_value({"type": "string"}, "cr-key")
        inner, line = kit.lit(_line(base + 4)), _line(base)
        if base >= BASE + 4 * MAX_DEPTH:
            containers = ['"{}"', '"[]"']
        else:
            deeper = self._any(kit, base + 4)
            obj = f'"{{" {inner} {key} ": " {deeper} ( "," {inner} {key} ": " {deeper} )*'
            arr = f'"[" {inner} {deeper} ( "," {inner} {deeper} )*'
            containers = [
                f'( {obj} {kit.lit(line + "}")} | "{{}}" )',
                f'( {arr} {kit.lit(line + "]")} | "[]" )',
            ]
        alternatives = {"object": containers[:1], None: [scalar, *containers]}[only]
        return kit.rule(name, " | ".join(alternatives))


COMMAND_R_PLUS = CommandRPlusFormat(
    "command-r-plus",
    "cohere Action: indented json list",
    Markup(
        section_open="\nAction:\n```json\n[\n",
        call_open='    {\n        "tool_name": "',
        name_close='",\n        "parameters": ',
        call_close="\n    }",
        call_sep=",\n",
        section_close="\n]```\n",
        triggers=("\nAction:\n```json", "Action:\n```json"),
        indented=True,
    ),
    markers=("Action:", "tojson(indent=4)"),
)
