"""GBNF grammars for constrained decoding: JSON Schema outputs and forced tool calls.

Built on llama.cpp's own JSON-Schema converter (llama_cpp.llama_grammar.SchemaConverter).
That converter silently ignores keywords it cannot express, so `unsupported_keyword`
lists them first: respond refuses a schema it would not enforce instead of pretending.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_cpp.llama_grammar import PRIMITIVE_RULES, SchemaConverter

from respond.engines._parsing import HERMES_CLOSE, HERMES_OPEN, MISTRAL_OPEN, Dialect

__all__ = [
    "CallSpec",
    "output_grammar",
    "unsupported_keyword",
]

# Keywords that only annotate a schema: nothing to enforce.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
# Keywords the grammar enforces. (oneOf is enforced as anyOf: the alternatives JSON
# models send are disjoint in practice, and a value matching several still parses.)
_ENFORCED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "format",
        "minLength",
        "maxLength",
    }
)
_FORMATS = frozenset({"date", "time", "date-time", "uuid", *(f"uuid{n}" for n in range(1, 6))})
_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
# Keywords whose value is a map of name -> subschema.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
# Length and count bounds become one grammar rule per step: Claude Code's `maxLength:
# 524288` alone would be a 4 MB grammar. Larger bounds are not enforced.
_BOUNDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_MAX_BOUND = 1000


def unsupported_keyword(schema: Any, path: str = "") -> tuple[str, str] | None:
    """The first (keyword, where) in `schema` that constrained decoding cannot enforce."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, Mapping):
        return ("(not an object)", path)
    for keyword, value in schema.items():
        where = f"{path}.{keyword}" if path else keyword
        if keyword in _ANNOTATIONS:
            continue
        if keyword not in _ENFORCED:
            return (keyword, where)
        problem = _unsupported_value(keyword, value, where)
        if problem is not None:
            return problem
    return None


def _unsupported_value(keyword: str, value: Any, where: str) -> tuple[str, str] | None:
    if keyword == "format" and value not in _FORMATS:
        return (f"format: {value}", where)
    if keyword in _BOUNDS and isinstance(value, int) and value > _MAX_BOUND:
        return (f"{keyword}: {value} (above {_MAX_BOUND})", where)
    if keyword == "type":
        kinds = value if isinstance(value, list) else [value]
        if any(kind not in _TYPES for kind in kinds):
            return (f"type: {value}", where)
    if keyword in _SCHEMA_MAPS:
        if not isinstance(value, Mapping):
            return (keyword, where)
        for name, sub in value.items():
            found = unsupported_keyword(sub, f"{where}.{name}")
            if found:
                return found
    if keyword in _SCHEMA_LISTS:
        if not isinstance(value, list):
            return (keyword, where)
        for index, sub in enumerate(value):
            found = unsupported_keyword(sub, f"{where}[{index}]")
            if found:
                return found
    if keyword in ("items", "additionalProperties") and not isinstance(value, bool):
        return unsupported_keyword(value, where)
    return None


# ---------------------------------------------------------------- building grammars


@dataclass(frozen=True)
class CallSpec:
    """A function the grammar may call: its name and its arguments' schema (None: any JSON)."""

    name: str
    schema: Mapping[str, Any] | None


# Free thinking before the constrained part, for models that think in <think> blocks.
_THINK_RULES = {
    "think": 'think-char* "</think>" [ \\n]*',
    "think-char": '[^<] | "<" [^/]',
}


def output_grammar(
    *,
    dialect: Dialect = "hermes",
    calls: Sequence[CallSpec] = (),
    max_calls: int | None = None,
    json_output: bool = False,
    schema: Mapping[str, Any] | None = None,
    think: Literal["open", "inside"] | None = None,
) -> str:
    """A grammar for the whole output: tool calls written in `dialect` (1..max_calls of
    `calls`), or one JSON value (`schema`'s, any object when None) when `json_output`,
    or either. `think`: "open" allows a free <think> block first; "inside" means the
    prompt opened it, so free text up to </think> comes first.
    """
    converter = _converter()
    extra: dict[str, str] = {}  # respond's own rules, kept apart from the converter's
    choices = []
    if calls:
        choices.append(_calls_rule(converter, extra, dialect, calls, max_calls))
    if json_output:
        choices.append(_value_rule(converter, schema, "out", "schema"))
    assert choices, "a grammar needs calls or a JSON output"
    rules = dict(converter._rules)
    rules.update(extra)
    if "char" in rules:
        # JSON strings may not hold raw control characters (the stock rule allows them).
        rules["char"] = _JSON_CHAR
    body = " | ".join(choices)
    if think == "open":
        body = f'( "<think>" think )? ( {body} )'
    elif think == "inside":
        body = f"think ( {body} )"
    rules["root"] = body
    if think:
        rules.update(_THINK_RULES)
    return _format(rules)


_JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ' + " ".join(["[0-9a-fA-F]"] * 4) + ")"


def _calls_rule(
    converter: Any,
    extra: dict[str, str],
    dialect: Dialect,
    calls: Sequence[CallSpec],
    max_calls: int | None,
) -> str:
    alternatives = []
    key = "parameters" if dialect == "llama3" else "arguments"
    lit = converter._format_literal
    for index, call in enumerate(calls):
        arguments = _value_rule(converter, call.schema, f"fn{index}", f"fn{index}")
        head = json.dumps({"name": call.name, key: 0})[: -len("0}")]
        alternatives.append(f'{lit(head)} {arguments} "}}"')
    extra["call"] = " | ".join(alternatives)
    if dialect == "hermes":
        extra["one-call"] = f"{lit(HERMES_OPEN + chr(10))} call {lit(chr(10) + HERMES_CLOSE)}"
        extra["calls"] = _repeat("one-call", lit("\n"), max_calls)
    elif dialect == "mistral":
        extra["calls"] = f'{lit(MISTRAL_OPEN + "[")} {_repeat("call", lit(", "), max_calls)} "]"'
    else:  # Llama 3 writes one call per turn
        extra["calls"] = "call"
    return "calls"


def _repeat(rule: str, separator: str, upto: int | None) -> str:
    if upto is None:
        return f"{rule} ({separator} {rule})*"
    return f"{rule}" + f" ({separator} {rule}" * (upto - 1) + ")?" * (upto - 1)


def _converter() -> Any:
    make: Any = SchemaConverter  # untyped upstream code
    return make(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _value_rule(converter: Any, schema: Mapping[str, Any] | None, name: str, url: str) -> str:
    if schema is None:
        return str(converter._add_primitive("object", PRIMITIVE_RULES["object"]))
    prefixed = _prefix_defs(_any_where_untyped(json.loads(json.dumps(schema))), name)
    resolved = converter.resolve_refs(prefixed, url)
    return str(converter.visit(resolved, name))


def _any_where_untyped(schema: Any, *, root: bool = True) -> Any:
    """Give every subschema that only annotates (`{}`, `{"description": ...}`: any JSON
    value) every type, which llama.cpp's converter understands; it rejects such a schema,
    or reads `{}` as "an object" (right at the root only: arguments are an object)."""
    if not isinstance(schema, dict):
        return schema
    if not root and all(key in _ANNOTATIONS for key in schema):
        schema["type"] = sorted(_TYPES)
        return schema
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                _any_where_untyped(sub, root=False)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for sub in value:
                _any_where_untyped(sub, root=False)
        elif key in ("items", "additionalProperties"):
            _any_where_untyped(value, root=False)
    return schema


def _prefix_defs(schema: Any, prefix: str) -> Any:
    """Rename $defs so two schemas' definitions (or a def named like a builtin) never clash."""
    if not isinstance(schema, dict):
        return schema
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            schema[key] = {f"{prefix}-{n}": v for n, v in schema[key].items()}
    for node in _walk(schema):
        ref = node.get("$ref")
        if isinstance(ref, str):
            for key in ("$defs", "definitions"):
                mark = f"#/{key}/"
                if ref.startswith(mark):
                    node["$ref"] = f"{mark}{prefix}-{ref[len(mark) :]}"
    return schema


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _format(rules: Mapping[str, str]) -> str:
    return "\n".join(f"{name} ::= {rule}" for name, rule in sorted(rules.items()))
