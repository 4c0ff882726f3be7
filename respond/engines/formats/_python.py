"""Values as Python prints them (`repr`): the grammar that writes them, and reading them back.

Templates that print a value with Jinja's `| string` (or `{{ value }}`) write Python's text of
it: `True`, `None`, `['a', 'b "c"']`, `{'k': 2}`. MiniCPM 5 writes every non-string parameter
that way, LFM2.5 its list arguments. The grammar writes what `repr` writes, under a JSON
Schema, with two limits: a string holds no control character but a line break, a carriage
return or a tab, and not both kinds of quote (repr would escape one of them).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines.formats._base import GrammarKit
from respond.engines.formats._spec import is_string_schema

__all__ = ["members", "python_value", "read_python"]

# A character of a quoted string, and the escapes repr writes for the ones it does not keep.
_CHAR = r"""[^"'\\\x00-\x1F\x7F] | "\\" [\\nrt]"""


def read_python(text: str) -> Any:
    """The value a Python literal (True, None, ['a'], {'k': 1}) is; ValueError if it is none."""
    try:
        return ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a Python literal: {text[:40]!r}") from exc


def python_value(kit: GrammarKit, schema: Mapping[str, Any] | None, name: str) -> str:
    """A rule for one value under `schema` (None: any value), written as repr writes it."""
    if not isinstance(schema, Mapping):
        return _any(kit)
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(choices, list):
        return "( " + " | ".join(kit.lit(repr(choice)) for choice in choices) + " )"
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            alternatives = [python_value(kit, o, f"{name}-{n}") for n, o in enumerate(options)]
            return "( " + " | ".join(alternatives) + " )"
    kinds = schema.get("type")
    if isinstance(kinds, list):
        alternatives = [
            python_value(kit, {**schema, "type": kind}, f"{name}-{kind}") for kind in kinds
        ]
        return "( " + " | ".join(alternatives) + " )"
    if is_string_schema(schema):
        return _string(kit)
    if kinds == "boolean":
        return '( "True" | "False" )'
    if kinds == "null":
        return '"None"'
    if kinds in ("integer", "number"):
        return kit.json_value(schema, name)  # the same digits as JSON's
    if kinds == "array":
        return _array(kit, schema, name)
    if kinds == "object" and isinstance(schema.get("properties"), Mapping):
        required = set(schema.get("required", ()))
        parts = [
            (f"{kit.lit(f'{key!r}: ')} {python_value(kit, sub, f'{name}-{n}')}", key in required)
            for n, (key, sub) in enumerate(schema["properties"].items())
            if isinstance(sub, Mapping)
        ]
        return f'"{{" {members(kit, parts, kit.lit(", "), f"{name}-m")} "}}"'
    return _any(kit)


def members(
    kit: GrammarKit, parts: Sequence[tuple[str, bool]], sep: str, name: str, empty: bool = True
) -> str:
    """A rule for `parts` (GBNF, required) in their order, the optional ones left out or
    not, `sep` between those written (`empty`: none at all is one of its texts)."""
    # first(i): the first part written is one of i.. (all before it optional);
    # rest(i): after a part, `sep` and the next one, or the end.
    count = len(parts)
    for i in range(count, -1, -1):
        first, rest = [], []
        for j in range(i, count):
            part, required = parts[j]
            first.append(f"{part} {name}-r{j + 1}")
            rest.append(f"{sep} {part} {name}-r{j + 1}")
            if required:
                break
        else:
            if i or empty:
                first.append('""')
            rest.append('""')
        kit.rule(f"{name}-f{i}", " | ".join(first))
        kit.rule(f"{name}-r{i}", " | ".join(rest))
    return f"{name}-f0"


def _string(kit: GrammarKit) -> str:
    """A string as repr quotes it: in single quotes, or in double quotes when it holds a
    single quote (and then no double one)."""
    kit.rule("py-char", _CHAR)
    single = '"\'" ( py-char | "\\"" )* "\'"'
    double = '"\\"" py-char* "\'" ( py-char | "\'" )* "\\""'
    return kit.rule("py-string", f"{single} | {double}")


def _array(kit: GrammarKit, schema: Mapping[str, Any], name: str) -> str:
    items = schema.get("items")
    item = python_value(kit, items if isinstance(items, Mapping) else None, f"{name}-i")
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    low = low if isinstance(low, int) and low > 0 else 0
    high = high if isinstance(high, int) and high >= max(low, 1) else None
    if high == 1:
        listed = item
    else:  # the first item, then the others
        upper = "" if high is None else str(high - 1)
        listed = f'{item} ( ", " {item} ){{{max(low - 1, 0)},{upper}}}'
    return f'"[" {listed} "]"' if low else f'"[" ( {listed} )? "]"'


def _any(kit: GrammarKit) -> str:
    number = kit.json_value({"type": "number"}, "py-num")
    string = _string(kit)
    kit.rule("py-pair", f'{string} ": " py-any')
    return kit.rule(
        "py-any",
        f'{string} | {number} | "True" | "False" | "None" '
        '| "[" ( py-any ( ", " py-any )* )? "]" | "{" ( py-pair ( ", " py-pair )* )? "}"',
    )
