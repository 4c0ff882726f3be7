"""GBNF grammars for constrained decoding: JSON Schema outputs and forced tool calls.

Built on llama.cpp's own JSON-Schema converter (llama_cpp.llama_grammar.SchemaConverter).
That converter silently ignores keywords it cannot express, so `unsupported_keyword`
lists them first: respond refuses a schema it would not enforce instead of pretending.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, SchemaConverter

from respond.engines._base import InputGrammar
from respond.engines.formats import HERMES, THINK_TAGS, ChatFormat, Think
from respond.engines.grammars import Grammar, gbnf_rules, parse_grammar
from respond.engines.llamacpp._numbers import NUMERIC_KEYWORDS, numeric_problem, numeric_rule
from respond.protocol.limits import Limits

__all__ = [
    "REASONING_PROBE",
    "CallLead",
    "CallSpec",
    "input_schema",
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
        *NUMERIC_KEYWORDS,
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


# A string schema's private keyword: {"syntax": ..., "definition": ...}, a custom tool's
# grammar (engines/grammars). Never in a client's schema: `unsupported_keyword` refuses it
# there, and `input_schema` adds it only after that check.
INPUT_GRAMMAR = "x-respond-input-grammar"


def input_schema(parameters: Mapping[str, Any], grammar: InputGrammar) -> dict[str, Any]:
    """A custom tool's parameters with its `input` string under `grammar`."""
    value = {
        "type": "string",
        INPUT_GRAMMAR: {"syntax": grammar.syntax, "definition": grammar.definition},
    }
    return {**parameters, "properties": {"input": value}}


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
    numeric = numeric_problem(schema)
    if numeric is not None:
        return (numeric, path or "(root)")
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


# The reasoning text of the probe turn call_lead renders: a word no template writes itself.
REASONING_PROBE = "Reasoning0probe"


@dataclass(frozen=True)
class CallLead:
    """What the template's history writes between a turn's prompt and its calls, read off
    the template (engines/llamacpp/_prompt.py's call_lead): `bare` for a turn of calls
    alone; `around`, before and after the reasoning text of a turn that reasons first.
    None where the history does not hold such a turn after the prompt (a template that
    drops an empty reasoning block the prompt opened; one that shows no reasoning)."""

    bare: str | None
    around: tuple[str, str] | None = None


def output_grammar(
    *,
    chat_format: ChatFormat = HERMES,
    calls: Sequence[CallSpec] = (),
    max_calls: int | None = None,
    json_output: bool = False,
    schema: Mapping[str, Any] | None = None,
    think: Literal["open", "inside"] | None = None,
    think_markup: Think = THINK_TAGS,
    think_limit: int | None = None,
    lead: CallLead | None = None,
) -> str:
    """A grammar for the whole output: tool calls written in `chat_format` (1..max_calls
    of `calls`), or one JSON value (`schema`'s, any object when None) when `json_output`,
    or either. `think`: "open" allows a free reasoning block first; "inside" means the
    prompt opened it, so free text up to its close comes first. `think_limit` bounds that
    text (in characters, none of them the first of the close marker), so that a model that
    would reason on and on must still come to what the grammar forces. With `lead`, the
    calls come after exactly what the template's history writes before them, and the
    reasoning before them only where and as the history writes it.
    """
    kit = _Kit()
    block = None if think is None else _think_block(kit, think, think_markup, think_limit)
    before = "" if block is None else f"( {block} )?" if think == "open" else block
    paths = []
    if calls:
        pairs = [(call.name, call.schema) for call in calls]
        written = chat_format.grammar(kit, pairs, max_calls)
        if lead is None:
            paths.append(_after(before, written))
        else:
            written = kit.rule("lead-calls", written)
            if lead.bare is not None:
                paths.append(f"{kit.lit(lead.bare)} {written}")
            # Reasoning only as the history writes it: where it shows none in such a turn,
            # the turn has none (the next prompt would not hold it, nor the model see it).
            if lead.around is not None and think is not None and think_limit is not None:
                text = _reasoning_text(kit, think_markup, think_limit)
                pre, post = (kit.lit(part) for part in lead.around)
                paths.append(f"{pre} {text} {post} {written}")
    if json_output:
        paths.append(_after(before, kit.json_value(schema, "out")))
    assert paths, "a grammar needs calls or a JSON output"
    return kit.finish(" | ".join(f"( {path} )" for path in paths))


def _after(before: str, body: str) -> str:
    return f"{before} ( {body} )" if before else body


def _think_block(kit: _Kit, think: str, markup: Think, limit: int | None) -> str:
    """A reasoning block: its open marker (unless the prompt opened it), the text, the
    close marker and the gap after it."""
    if limit is None:
        text = kit.text_until(markup.close, "think")
    else:
        text = kit.rule("think", f"[^{_class_char(markup.close[0])}]{{0,{limit}}}")
    block = f"{text} {kit.lit(markup.close)} {markup.gap}"
    return f"{kit.lit(markup.open)} {block}" if think == "open" else block


def _reasoning_text(kit: _Kit, markup: Think, limit: int) -> str:
    """Reasoning as the parser keeps it: no whitespace at either end (the template writes
    its own there), at most `limit` characters, none the first one of the close marker."""
    if limit < 1:
        return '""'
    others = _class_char(markup.close[0])
    edge = kit.rule("reason-edge", f"[^ \\t\\n\\r{others}]")
    inner = f"[^{others}]{{0,{max(0, limit - 2)}}}"
    return kit.rule("reason", f"{edge} ( {inner} {edge} )?")


_JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u00" [01] [0-9a-f])'


class _Kit:
    """The GrammarKit a format builds its grammar with: llama.cpp's JSON-Schema converter
    for values (rewritten to the spacing of `tojson`), plus respond's own rules."""

    def __init__(self) -> None:
        self.converter = _converter()
        self.extra: dict[str, str] = {}  # respond's own rules, kept apart from the converter's

    def lit(self, text: str) -> str:
        return str(self.converter._format_literal(text)) if text else '""'

    def json_value(self, schema: Mapping[str, Any] | None, name: str) -> str:
        return _value_rule(self.converter, schema, name, name)

    def properties(
        self, schema: Mapping[str, Any] | None, name: str
    ) -> list[tuple[str, Mapping[str, Any], bool]] | None:
        if schema is None or not isinstance(schema.get("properties"), Mapping):
            return None
        prefixed = _prefix_defs(_any_where_untyped(json.loads(json.dumps(schema))), name)
        resolved = self.converter.resolve_refs(prefixed, name)
        required = set(resolved.get("required", ()))
        return [(key, sub, key in required) for key, sub in resolved["properties"].items()]

    def rule(self, name: str, body: str) -> str:
        self.extra[name] = body
        return name

    def raw_string(self, schema: Mapping[str, Any], name: str) -> str | None:
        found = schema.get(INPUT_GRAMMAR)
        if not isinstance(found, Mapping):
            return None
        root, rules = gbnf_rules(_parsed(found), f"{name}-g", "raw")
        self.extra.update(rules)
        return root

    def text_until(self, marker: str, name: str) -> str:
        """Text without `marker` in it: a rule per state of the automaton that finds it."""
        states = [f"{name}-s{n}" for n in range(len(marker))]
        for n, state in enumerate(states):
            seen = marker[:n]
            moves: dict[int, list[str]] = {}
            for char in dict.fromkeys(marker):
                if char == marker[n]:
                    continue
                moves.setdefault(_fallback(marker, seen + char), []).append(char)
            alternatives = ['""']
            if n + 1 < len(marker):
                alternatives.append(f"{self.lit(marker[n])} {states[n + 1]}")
            others = "".join(_class_char(c) for c in dict.fromkeys(marker))
            alternatives.append(f"[^{others}] {states[0]}")
            for target, chars in moves.items():
                alternatives.append(f"[{''.join(_class_char(c) for c in chars)}] {states[target]}")
            self.extra[state] = " | ".join(alternatives)
        return states[0]

    def finish(self, root: str) -> str:
        rules = _canonical_spacing(dict(self.converter._rules))
        rules.update(self.extra)
        if "char" in rules:
            # JSON strings as json.dumps writes them: no raw control characters (the stock
            # rule allows them), and only the escapes it writes.
            rules["char"] = _JSON_CHAR
        rules["root"] = root
        return _format(rules)


def _fallback(marker: str, text: str) -> int:
    """How much of `marker` the end of `text` still matches (a KMP step)."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


def _class_char(char: str) -> str:
    if char in "\\]^-[":
        return "\\" + char
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    if char == "\r":
        return "\\r"
    return char


# A GBNF rule body, token by token: string literals, character classes, the rest.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|\s+|[\w-]+|\{[^}]*\}|\S')


def _canonical_spacing(rules: dict[str, str]) -> dict[str, str]:
    """The converter lets the model put any whitespace between JSON tokens; templates write
    `tojson`'s: one space after "," and ":", none elsewhere. Rewrite its rules to that."""
    out = {}
    for name, body in rules.items():
        tokens = [t for t in _TOKENS.findall(body) if not t.isspace()]
        kept: list[str] = []
        for token in tokens:
            if token == "space":
                if kept and kept[-1] in ('","', '":"'):
                    kept[-1] = kept[-1][:-1] + ' "'
                    continue
                token = '""'
            kept.append(token)
        out[name] = " ".join(kept)
    out["space"] = '""'
    return out


_Untyped: Any = SchemaConverter  # untyped upstream code


class _Converter(_Untyped):  # type: ignore[misc]
    """llama-cpp-python's converter, plus numeric bounds and multipleOf (_numbers.py)."""

    def visit(self, schema: Any, name: str) -> Any:
        if isinstance(schema, dict) and isinstance(schema.get(INPUT_GRAMMAR), dict):
            # A string whose text (as the inside of a JSON string) is in a custom grammar.
            root, rules = gbnf_rules(_parsed(schema[INPUT_GRAMMAR]), f"{name}-g", "json")
            for rule_name, body in rules.items():
                self._rules[rule_name] = body
            return self._add_rule(name or "root", f'"\\"" {root} "\\""')
        if isinstance(schema, dict):
            kinds = schema.get("type")
            if isinstance(kinds, list) and not _COMBINATORS & schema.keys():
                # The converter turns a list of types into bare {"type": t} alternatives,
                # losing the other keywords (bounds, lengths): keep them on each.
                union = [{**schema, "type": kind} for kind in kinds]
                return super().visit({"anyOf": union}, name)
            rule = numeric_rule(schema, name or "root", self._add_rule)
            if rule is not None:
                rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
                return self._add_rule(rule_name, rule)
        return super().visit(schema, name)


_COMBINATORS = frozenset({"$ref", "anyOf", "oneOf", "allOf", "const", "enum"})


def _parsed(grammar: Mapping[str, Any]) -> Grammar:
    # The request's checks parsed it already (responses/limits.py); should it fail here
    # all the same, prepare reports it as a grammar it cannot build (a 400).
    return parse_grammar(grammar["syntax"], grammar["definition"], max_repeat=Limits.repetition)


def _converter() -> Any:
    return _Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


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
