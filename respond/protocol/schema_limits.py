"""Limits on JSON Schemas and regexes, checked before any grammar is built from them.

A grammar engine expands bounds: `maxLength: 20000` becomes twenty thousand nested
rules, `maxItems: 1e9` a grammar no memory holds. So every bound, the size of every
schema and the features of every regex are checked here first, each refusal a 400
naming the field and the limit (`Limits` in respond/protocol/limits.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, json_path

__all__ = ["SchemaBudget", "check_regex", "check_schema"]

# Keywords whose value a grammar repeats that many times.
_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")


@dataclass
class SchemaBudget:
    """The schema nodes a request may still use, shared by all its schemas."""

    nodes: int


def check_schema(
    schema: Any, param: str, limits: Limits, budget: SchemaBudget, *, code: str
) -> None:
    """Raise a 400 (`code`, naming the field under `param`) for a schema over a limit."""
    stack: list[tuple[Any, list[str | int], int]] = [(schema, [], 1)]
    while stack:
        node, where, depth = stack.pop()
        if not isinstance(node, Mapping):
            continue  # a boolean schema, or a bad value the converter reports later
        if depth > limits.schema_depth:
            _refuse(param, where, f"schemas nest at most {limits.schema_depth} levels deep", code)
        budget.nodes -= 1 + len(node)
        if budget.nodes < 0:
            _refuse(
                param,
                where,
                f"the request's schemas hold at most {limits.schema_nodes} keywords",
                code,
            )
        _check_keywords(node, param, where, limits, code)
        for child, path in _children(node, where):
            stack.append((child, path, depth + 1))


def _check_keywords(
    node: Mapping[str, Any], param: str, where: list[str | int], limits: Limits, code: str
) -> None:
    for keyword in _BOUNDS:
        if keyword not in node:
            continue
        value = node[keyword]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            _refuse(param, [*where, keyword], "it must be a non-negative integer", code)
        if value > limits.repetition:
            _refuse(
                param,
                [*where, keyword],
                f"{value} is over the limit of {limits.repetition} (a bound is expanded "
                "into the grammar that enforces it)",
                code,
            )
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) > limits.enum_values:
        _refuse(param, [*where, "enum"], f"an enum has at most {limits.enum_values} values", code)
    pattern = node.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            _refuse(param, [*where, "pattern"], "a pattern must be a string", code)
        shown = json_path([param, *where, "pattern"])
        check_regex(pattern, param, limits, code=code, shown=shown)


def _children(node: Mapping[str, Any], where: list[str | int]) -> list[tuple[Any, list[str | int]]]:
    out: list[tuple[Any, list[str | int]]] = []
    for key in _SCHEMA_MAPS:
        value = node.get(key)
        if isinstance(value, Mapping):
            out.extend((sub, [*where, key, name]) for name, sub in value.items())
    for key in _SCHEMA_LISTS:
        value = node.get(key)
        if isinstance(value, list):
            out.extend((sub, [*where, key, i]) for i, sub in enumerate(value))
    for key in _SCHEMA_ONE:
        if key in node:
            out.append((node[key], [*where, key]))
    return out


def _refuse(param: str, where: list[str | int], why: str, code: str) -> None:
    field = json_path([param, *where])
    raise APIError(400, f"Invalid schema at '{field}': {why}.", param=param, code=code)


# ---------------------------------------------------------------- regexes

# What a regex may use: the subset grammar converters translate faithfully.
_GROUP_SYNTAX = re.compile(r"\(\?")  # lookaround, named and non-capturing groups, flags
_BACKREF = re.compile(r"\\[1-9]|\\k<")
_BOUND = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")


def check_regex(
    pattern: str, param: str, limits: Limits, *, code: str, shown: str | None = None
) -> None:
    """A regex that is valid, short enough, and uses only what a grammar can enforce.

    `shown`: where the regex is, for the message, when that is deeper than `param`."""
    where = shown or param
    if len(pattern) > limits.pattern_length:
        _bad_regex(param, where, f"it is longer than {limits.pattern_length} characters", code)
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        _bad_regex(param, where, f"it is not a valid regular expression ({exc})", code)
    plain = _outside_classes(pattern)
    if _GROUP_SYNTAX.search(plain):
        _bad_regex(
            param,
            where,
            "'(?' groups (lookahead, lookbehind, named or non-capturing groups, flags) "
            "cannot be enforced by constrained decoding",
            code,
        )
    if _BACKREF.search(plain):
        _bad_regex(param, where, "backreferences cannot be enforced by constrained decoding", code)
    for match in _BOUND.finditer(plain):
        for number in match.groups():
            if number and int(number) > limits.repetition:
                _bad_regex(
                    param,
                    where,
                    f"the bound {match.group(0)} is over the limit of {limits.repetition}",
                    code,
                )


def _outside_classes(pattern: str) -> str:
    """`pattern` with escapes kept and [character classes] blanked out (their '(' and '{'
    are literal characters, not syntax)."""
    out: list[str] = []
    index, inside = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(" " * 2 if inside else pattern[index : index + 2])
            index += 2
            continue
        if inside:
            inside = char != "]"
            out.append(" ")
        else:
            inside = char == "["
            out.append(" " if inside else char)
        index += 1
    return "".join(out)


def _bad_regex(param: str, where: str, why: str, code: str) -> None:
    raise APIError(400, f"Invalid regex in '{where}': {why}.", param=param, code=code)
