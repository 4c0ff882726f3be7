"""Kimi K3's XTML: parameters as tags whose `type` attribute is the value's JSON type.

    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|open|>argument key="days" type="number"<|sep|>2<|close|>argument<|sep|>

A `MarkupFormat` whose `Params.name_close` holds `{type}`: the grammar writes the type the
schema gives a value (one alternative per type where it allows several), the parser reads
it back to tell a string (written raw) from JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from respond.engines.formats._base import GrammarKit
from respond.engines.formats._markup import MarkupFormat
from respond.engines.formats._spec import Params, is_string_schema

__all__ = ["XtmlFormat", "xtml_type"]

# JSON Schema's types -> the template's (its `xtml_type` macro: integers are numbers).
_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "object",
    "array": "array",
}


def xtml_type(value: Any) -> str:
    """The type the template writes for `value`."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, Mapping) else "array"


def _types(schema: Mapping[str, Any] | None) -> list[str]:
    """The types a value under `schema` may be written with."""
    if is_string_schema(schema):
        return ["string"]
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list):
        names = list(_TYPES)
    return list(dict.fromkeys(_TYPES[n] for n in names if n in _TYPES)) or ["string"]


class XtmlFormat(MarkupFormat):
    @staticmethod
    def _param(params: Params, key: str, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        head = params.name_close.replace("{type}", xtml_type(value))
        return params.open + key + head + text + params.close

    def _arguments_rule(self, kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
        params = self.markup.params
        assert params is not None
        if kit.properties(schema, name) is not None:
            return super()._arguments_rule(kit, schema, name)
        key = kit.rule(f"{name}-key", "[A-Za-z0-9_.-]+")  # any keys, each of any type
        one = f"{kit.lit(params.open)} {key} {self._typed(kit, params, None, name)}"
        return kit.rule(f"{name}-args", f"( {one} {kit.lit(params.close)} )*")

    def _param_rule(
        self, kit: GrammarKit, params: Params, key: str, sub: Mapping[str, Any], name: str
    ) -> str:
        typed = self._typed(kit, params, sub, name)
        return f"{kit.lit(params.open + key)} {typed} {kit.lit(params.close)}"

    @staticmethod
    def _typed(kit: GrammarKit, params: Params, sub: Mapping[str, Any] | None, name: str) -> str:
        """The type attribute, then a value of that type."""
        before, _, after = params.name_close.partition("{type}")
        types = _types(sub)
        alternatives = []
        for kind in types:
            if kind == "string":
                choices = (
                    sub.get("enum", [sub["const"]] if "const" in sub else None) if sub else None
                )
                value = (
                    "( " + " | ".join(kit.lit(str(c)) for c in choices) + " )"
                    if isinstance(choices, list)
                    else kit.text_until(params.close, f"{name}-raw")
                )
            else:
                exact = sub if len(types) == 1 else {"type": kind}
                value = kit.json_value(exact, f"{name}-{kind}")
            alternatives.append(f"{kit.lit(before + kind + after)} {value}")
        return "( " + " | ".join(alternatives) + " )"
