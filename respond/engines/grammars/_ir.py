"""The grammar both converters build (regex and Lark), and its GBNF.

A `Grammar` is a set of named rules over characters. The same grammar is written as GBNF
two ways: `raw` (the text itself, for formats that write a string argument as it is) and
`json` (the text inside a JSON string, as `json.dumps` writes it: `"` as `\\"`, a newline
as `\\n`), since most formats write a call's arguments as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MAX_CHAR",
    "Alt",
    "Chars",
    "Expr",
    "Grammar",
    "GrammarError",
    "Lit",
    "Ref",
    "Repeat",
    "Seq",
    "chars_of",
    "complement",
    "fold_case",
    "to_gbnf",
]

MAX_CHAR = 0x10FFFF


class GrammarError(ValueError):
    """A grammar that is malformed or uses what cannot be enforced; the message says why."""


@dataclass(frozen=True)
class Chars:
    """One character from a set: sorted, disjoint, non-adjacent (first, last) code points."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Expr, ...]


@dataclass(frozen=True)
class Repeat:
    item: Expr
    low: int
    high: int | None  # None: no upper bound


@dataclass(frozen=True)
class Ref:
    name: str


Expr = Chars | Lit | Seq | Alt | Repeat | Ref


@dataclass(frozen=True)
class Grammar:
    """Rules by name; `start` is where the text begins."""

    rules: Mapping[str, Expr]
    start: str = "start"


def chars_of(ranges: list[tuple[int, int]]) -> Chars:
    """A Chars from any ranges (overlapping, unsorted): merged."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return Chars(tuple(merged))


def complement(chars: Chars) -> Chars:
    out, next_low = [], 0
    for low, high in chars.ranges:
        if low > next_low:
            out.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_CHAR:
        out.append((next_low, MAX_CHAR))
    return Chars(tuple(out))


def fold_case(expr: Expr) -> Expr:
    """`expr` matching ASCII letters in either case (Lark's `i` flag)."""
    if isinstance(expr, Lit):
        return Seq(tuple(_fold_chars(chars_of([(ord(c), ord(c))])) for c in expr.text))
    if isinstance(expr, Chars):
        return _fold_chars(expr)
    if isinstance(expr, Seq):
        return Seq(tuple(fold_case(item) for item in expr.items))
    if isinstance(expr, Alt):
        return Alt(tuple(fold_case(option) for option in expr.options))
    if isinstance(expr, Repeat):
        return Repeat(fold_case(expr.item), expr.low, expr.high)
    return expr  # a Ref: the rule it names keeps its own case


def _fold_chars(chars: Chars) -> Chars:
    extra = []
    for low, high in chars.ranges:
        for lower, upper in ((ord("a"), ord("z")), (ord("A"), ord("Z"))):
            start, end = max(low, lower), min(high, upper)
            if start <= end:
                shift = ord("A") - ord("a") if lower == ord("a") else ord("a") - ord("A")
                extra.append((start + shift, end + shift))
    return chars_of([*chars.ranges, *extra])


# ---------------------------------------------------------------- GBNF

# What json.dumps escapes inside a string: the quote, the backslash, control characters.
_JSON_SPECIAL = chars_of([(0x00, 0x1F), (ord('"'), ord('"')), (ord("\\"), ord("\\"))])


@dataclass
class _Writer:
    grammar: Grammar
    prefix: str
    mode: Literal["raw", "json"]
    rules: dict[str, str] = field(default_factory=dict)
    classes: dict[Chars, str] = field(default_factory=dict)

    def name(self, rule: str) -> str:
        # GBNF names are letters, digits and '-'; Lark names have '_' but never '-'.
        return f"{self.prefix}-{rule.replace('_', '-')}"

    def expr(self, expr: Expr) -> str:
        if isinstance(expr, Lit):
            return self.lit(expr.text)
        if isinstance(expr, Chars):
            return self.chars(expr)
        if isinstance(expr, Ref):
            return self.name(expr.name)
        if isinstance(expr, Seq):
            return " ".join(self.expr(item) for item in expr.items) or '""'
        if isinstance(expr, Alt):
            return "( " + " | ".join(self.expr(option) for option in expr.options) + " )"
        item = f"( {self.expr(expr.item)} )"
        if (expr.low, expr.high) == (0, 1):
            return item + "?"
        if (expr.low, expr.high) == (0, None):
            return item + "*"
        if (expr.low, expr.high) == (1, None):
            return item + "+"
        if expr.high is None:
            return f"{item}{{{expr.low},}}"
        if expr.low == expr.high:
            return f"{item}{{{expr.low}}}"
        return f"{item}{{{expr.low},{expr.high}}}"

    def lit(self, text: str) -> str:
        if not text:
            return '""'
        if self.mode == "json":
            text = json.dumps(text, ensure_ascii=False)[1:-1]
        return '"' + "".join(_literal_char(c) for c in text) + '"'

    def chars(self, chars: Chars) -> str:
        if not chars.ranges:
            raise GrammarError("a character class that matches no character")
        if self.mode == "raw":
            return _class(chars.ranges)
        # One rule per distinct set: the escapes of a wide set ('.', [^x]) are written once.
        if chars not in self.classes:
            self.classes[chars] = f"{self.prefix}-c{len(self.classes)}"
            self.rules[self.classes[chars]] = self._json_chars(chars)
        return self.classes[chars]

    def _json_chars(self, chars: Chars) -> str:
        plain = _intersect(chars, complement(_JSON_SPECIAL))
        options = [_class(plain.ranges)] if plain.ranges else []
        for code in _codes(_intersect(chars, _JSON_SPECIAL)):
            options.append(self.lit(chr(code)))
        return " | ".join(options)


def to_gbnf(
    grammar: Grammar, prefix: str, mode: Literal["raw", "json"]
) -> tuple[str, dict[str, str]]:
    """(the start rule's name, every rule by name) of `grammar` in GBNF, names prefixed."""
    writer = _Writer(grammar, prefix, mode)
    for name, expr in grammar.rules.items():
        writer.rules[writer.name(name)] = writer.expr(expr)
    return writer.name(grammar.start), writer.rules


def _intersect(a: Chars, b: Chars) -> Chars:
    out = []
    for low, high in a.ranges:
        for other_low, other_high in b.ranges:
            start, end = max(low, other_low), min(high, other_high)
            if start <= end:
                out.append((start, end))
    return chars_of(out)


def _codes(chars: Chars) -> list[int]:
    return [code for low, high in chars.ranges for code in range(low, high + 1)]


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for low, high in ranges:
        if low == high:
            parts.append(_class_char(low))
        else:
            parts.append(f"{_class_char(low)}-{_class_char(high)}")
    return "[" + "".join(parts) + "]"


def _class_char(code: int) -> str:
    char = chr(code)
    if (char.isalnum() and code < 0x80) or char in " _.,:;!?'\"#$%&*+/<=>@`{|}~()":
        return char
    return _hex(code)


def _literal_char(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return _hex(code)
    return char


def _hex(code: int) -> str:
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"
