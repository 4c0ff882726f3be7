"""Lark grammars (OpenAI's subset of Lark's syntax) to a Grammar.

Covered: rules (lowercase) and terminals (uppercase), `start`, string literals "..."
(with Lark's `i` flag), character ranges "a".."z", /regex/ terminals (through _regex.py,
flags `i` and none else), `|`, grouping `( )`, optional `[ ]`, the operators `? * +`,
repetition `~ n` and `~ n..m`, aliases (`-> name`, dropped: they name tree nodes, not
text), rule modifiers `?` `!` and priorities `.n` (dropped likewise), `%import common.X`
(and `%import common (X, Y)`, `-> ALIAS`) for the terminals of Lark's common.lark listed
in _COMMON, and `%ignore`.

`%ignore`: Lark skips the ignored terminals between any two tokens (and before the
first and after the last). Here one of them may come, optionally, before each part of a
rule but its first (never inside a terminal): a model may write `1 + 2` or `1+2` for
`expr: NUMBER "+" NUMBER` with `%ignore WS`, but not ` 1 + 2 `. What it writes is always
what Lark parses; not every text Lark parses can be written.

Direct left recursion (`expr: expr "+" term | term`), which Lark's Earley parser takes
and llama.cpp's grammar engine does not, is rewritten to repetition (`term ("+" term)*`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from respond.engines.grammars._ir import (
    Alt,
    Expr,
    Grammar,
    GrammarError,
    Lit,
    Ref,
    Repeat,
    Seq,
    chars_of,
    fold_case,
)
from respond.engines.grammars._regex import regex_expr

__all__ = ["lark_grammar"]

# Lark's common.lark, the terminals grammars import (ESCAPED_STRING without its
# lookbehind: a quote, then characters other than a quote, backslash or newline, or a
# backslash and any character but a newline, then a quote).
_COMMON = r"""
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: "\"" (/[^"\\\n]/ | "\\" /./)* "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /(.|\n)*?/ "*/"
SQL_COMMENT: /--[^\n]*/
"""

_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\f\r]+|//[^\n]*|\\\n)
  | (?P<newline>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*"i?)
  | (?P<regex>/(?!/)(?:[^/\\\n]|\\.)+/[imslux]*)
  | (?P<directive>%[a-z]+)
  | (?P<arrow>->)
  | (?P<dots>\.\.)
  | (?P<number>\d+)
  | (?P<name>[?!]?[_a-zA-Z][_a-zA-Z0-9]*(?:\.[_a-zA-Z][_a-zA-Z0-9]*)*)
  | (?P<op>[:|()\[\]?*+~.,{}-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> list[_Tok]:
    out, pos, line = [], 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise GrammarError(f"line {line}: unexpected {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind == "newline":
            out.append(_Tok("newline", "\n", line))
        elif kind != "skip":
            out.append(_Tok(kind, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    out.append(_Tok("newline", "\n", line))
    return out


def lark_grammar(text: str, *, max_repeat: int) -> Grammar:
    """The Grammar of the texts `text`'s `start` rule derives."""
    parser = _Parser(_tokens(text), max_repeat)
    parser.statements()
    rules, ignored = parser.rules, parser.ignored
    for name in parser.imported:
        if name not in rules:
            rules[name] = parser.common(name)
    if "start" not in rules:
        raise GrammarError("the grammar has no 'start' rule")
    _check_names(rules)
    gap = None
    if ignored:  # a terminal (upper case): no gaps inside what is ignored
        rules["__IGNORED"] = ignored[0] if len(ignored) == 1 else Alt(tuple(ignored))
        gap = Repeat(Ref("__IGNORED"), 0, 1)
    out: dict[str, Expr] = {}
    for name, expr in rules.items():
        expr = _without_left_recursion(name, expr)
        out[name] = _with_gaps(expr, gap) if gap is not None and _is_rule(name) else expr
    return Grammar(out)


def _is_rule(name: str) -> bool:
    return name.lstrip("_")[:1].islower()


class _Parser:
    def __init__(self, tokens: list[_Tok], max_repeat: int) -> None:
        self.tokens, self.pos, self.max_repeat = tokens, 0, max_repeat
        self.rules: dict[str, Expr] = {}
        self.ignored: list[Expr] = []
        self.imported: dict[str, str] = {}  # name in this grammar -> name in common.lark

    def peek(self, ahead: int = 0) -> _Tok:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> _Tok:
        token = self.peek()
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def error(self, why: str) -> GrammarError:
        token = self.peek()
        return GrammarError(
            f"line {token.line}: {why} (at {token.text.strip() or 'end of line'!r})"
        )

    def expect(self, text: str) -> None:
        if self.peek().text != text:
            raise self.error(f"expected {text!r}")
        self.take()

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens) - 1

    # ------------------------------------------------------------ statements

    def statements(self) -> None:
        while not self.at_end():
            token = self.peek()
            if token.kind == "newline":
                self.take()
            elif token.kind == "directive":
                self.directive()
            elif token.kind == "name":
                self.definition()
            else:
                raise self.error("expected a rule, a terminal or a %directive")

    def definition(self) -> None:
        name = self.take().text.lstrip("?!")
        if "." in name:  # a priority: name.2
            name, _, priority = name.partition(".")
            if not priority.isdigit():
                raise self.error(f"bad priority for {name!r}")
        elif self.peek().text == "." and self.peek(1).kind == "number":
            self.take()
            self.take()
        if self.peek().text == "{":
            raise self.error("rule templates are not supported")
        if name in self.rules:
            raise self.error(f"{name!r} is defined twice")
        self.expect(":")
        self.rules[name] = self.expansions()
        self.end_of_statement()

    def end_of_statement(self) -> None:
        if self.peek().kind != "newline":
            raise self.error("unexpected text")

    def directive(self) -> None:
        word = self.take().text
        if word == "%ignore":
            self.ignored.append(self.expansions())
        elif word == "%import":
            self.import_()
        else:
            raise self.error(f"{word} is not supported (only %import common and %ignore)")
        self.end_of_statement()

    def import_(self) -> None:
        path = self.take()
        module, _, name = path.text.partition(".")
        if module != "common":
            raise self.error("only terminals of Lark's 'common' can be imported")
        if name:
            alias = name
            if self.peek().kind == "arrow":
                self.take()
                alias = self.take().text
            self.imported[alias] = name
            return
        self.expect("(")
        while True:
            name = self.take().text
            self.imported[name] = name
            if self.peek().text != ",":
                break
            self.take()
        self.expect(")")

    def common(self, name: str) -> Expr:
        source = self.imported[name]
        common = _common_rules(self.max_repeat)
        if source not in common:
            raise GrammarError(f"common.{source} is not one of the terminals respond knows")
        # The imported terminal's own parts come along under their common names.
        for part in _refs(common[source], common):
            if part != source:
                self.rules.setdefault(part, common[part])
        return common[source]

    # ------------------------------------------------------------ expressions

    def expansions(self) -> Expr:
        options = [self.alias()]
        while True:
            if self.peek().text == "|":
                self.take()
            elif self.peek().kind == "newline" and self._bar_after_newlines():
                while self.peek().kind == "newline":
                    self.take()
                self.take()
            else:
                break
            options.append(self.alias())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def _bar_after_newlines(self) -> bool:
        ahead = 0
        while self.peek(ahead).kind == "newline" and self.pos + ahead < len(self.tokens) - 1:
            ahead += 1
        return self.peek(ahead).text == "|"

    def alias(self) -> Expr:
        expr = self.expansion()
        if self.peek().kind == "arrow":
            self.take()
            if self.take().kind != "name":
                raise self.error("an alias needs a name")
        return expr

    def expansion(self) -> Expr:
        items: list[Expr] = []
        while self.peek().kind in ("string", "regex", "name") or self.peek().text in "([":
            if self.peek().kind == "name" and self.peek(1).text == ":":
                break  # the next definition (a missing newline is caught by the caller)
            items.append(self.repeated(self.atom()))
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def repeated(self, atom: Expr) -> Expr:
        token = self.peek()
        if token.text in ("?", "*", "+") and token.kind == "op":
            self.take()
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[token.text]
            return Repeat(atom, low, high)
        if token.text != "~":
            return atom
        self.take()
        low = self.bound()
        high = low
        if self.peek().kind == "dots":
            self.take()
            high = self.bound()
        if high < low:
            raise self.error("a ~ n..m repetition with m below n")
        return Repeat(atom, low, high)

    def bound(self) -> int:
        token = self.take()
        if token.kind != "number":
            raise self.error("expected a number")
        value = int(token.text)
        if value > self.max_repeat:
            raise self.error(f"the bound {value} is over the limit of {self.max_repeat}")
        return value

    def atom(self) -> Expr:
        token = self.take()
        if token.text in ("(", "["):
            inner = self.expansions()
            self.expect(")" if token.text == "(" else "]")
            return inner if token.text == "(" else Repeat(inner, 0, 1)
        if token.kind == "string":
            return self.string(token)
        if token.kind == "regex":
            return self.regex(token)
        if token.text[:1] in "?!" or "." in token.text:
            raise self.error("expected a rule or terminal name")
        return Ref(token.text)

    def string(self, token: _Tok) -> Expr:
        text, folded = _string_value(token.text)
        if self.peek().kind == "dots":
            self.take()
            end = self.take()
            if end.kind != "string":
                raise self.error("a range needs a string after '..'")
            last, _ = _string_value(end.text)
            if len(text) != 1 or len(last) != 1 or last < text:
                raise self.error("a range is two single characters, the first not after the second")
            return chars_of([(ord(text), ord(last))])
        return fold_case(Lit(text)) if folded else Lit(text)

    def regex(self, token: _Tok) -> Expr:
        body, _, flags = token.text[1:].rpartition("/")
        if set(flags) - {"i"}:
            raise self.error(f"regex flags {flags!r}: only 'i' is supported")
        try:
            expr = regex_expr(body.replace("\\/", "/"), max_repeat=self.max_repeat)
        except GrammarError as exc:
            raise self.error(f"in the regex {token.text}: {exc}") from None
        return fold_case(expr) if flags else expr


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0", "\\": "\\", '"': '"'}


def _string_value(token: str) -> tuple[str, bool]:
    """A "..." literal's text (Python's escapes), and whether it has the `i` flag."""
    folded = token.endswith("i")
    body = token[1 : -2 if folded else -1]
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = body[index + 1]
        if escaped in _ESCAPES:
            out.append(_ESCAPES[escaped])
            index += 2
        elif escaped in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[escaped]
            digits = body[index + 2 : index + 2 + size]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise GrammarError(f"bad escape in the string {token}") from None
            index += 2 + size
        else:  # Python keeps an unknown escape as it is
            out.append("\\" + escaped)
            index += 2
    return "".join(out), folded


def _common_rules(max_repeat: int) -> dict[str, Expr]:
    parser = _Parser(_tokens(_COMMON), max_repeat)
    parser.statements()
    return parser.rules


def _refs(expr: Expr, rules: dict[str, Expr], seen: set[str] | None = None) -> set[str]:
    """Every name `expr` refers to, through the rules it names."""
    seen = set() if seen is None else seen
    if isinstance(expr, Ref):
        if expr.name not in seen and expr.name in rules:
            seen.add(expr.name)
            _refs(rules[expr.name], rules, seen)
    elif isinstance(expr, Seq | Alt):
        for child in expr.items if isinstance(expr, Seq) else expr.options:
            _refs(child, rules, seen)
    elif isinstance(expr, Repeat):
        _refs(expr.item, rules, seen)
    return seen


def _check_names(rules: dict[str, Expr]) -> None:
    for name, expr in rules.items():
        for used in _direct_refs(expr):
            if used not in rules:
                raise GrammarError(f"{name!r} uses {used!r}, which is not defined")
        if not _is_rule(name):
            rule = next((used for used in _direct_refs(expr) if _is_rule(used)), None)
            if rule is not None:
                raise GrammarError(f"the terminal {name!r} uses the rule {rule!r}")


def _direct_refs(expr: Expr) -> list[str]:
    if isinstance(expr, Ref):
        return [expr.name]
    if isinstance(expr, Seq | Alt):
        children = expr.items if isinstance(expr, Seq) else expr.options
        return [name for child in children for name in _direct_refs(child)]
    if isinstance(expr, Repeat):
        return _direct_refs(expr.item)
    return []


def _without_left_recursion(name: str, expr: Expr) -> Expr:
    """`name: name a | name b | c | d` as `(c | d) (a | b)*`."""
    options = expr.options if isinstance(expr, Alt) else (expr,)
    recursive, others = [], []
    for option in options:
        items = option.items if isinstance(option, Seq) else (option,)
        if items and items[0] == Ref(name):
            recursive.append(Seq(items[1:]))
        else:
            others.append(option)
    if not recursive:
        return expr
    if not others:
        raise GrammarError(f"the rule {name!r} only refers to itself")
    base = others[0] if len(others) == 1 else Alt(tuple(others))
    tail = recursive[0] if len(recursive) == 1 else Alt(tuple(recursive))
    return Seq((base, Repeat(tail, 0, None)))


def _with_gaps(expr: Expr, gap: Expr) -> Expr:
    """A rule's expression with `gap` allowed before each of its parts but the first."""
    if isinstance(expr, Seq):
        first, *rest = expr.items
        return Seq((_with_gaps(first, gap), *(_gapped(item, gap) for item in rest)))
    if isinstance(expr, Alt):
        return Alt(tuple(_with_gaps(option, gap) for option in expr.options))
    if isinstance(expr, Repeat) and expr.high != 1:
        # The first repetition as it is, each further one after a gap.
        first, more = _with_gaps(expr.item, gap), _gapped(expr.item, gap)
        if expr.low == 0:
            return Repeat(Seq((first, Repeat(more, 0, _less(expr.high)))), 0, 1)
        return Seq((first, Repeat(more, expr.low - 1, _less(expr.high))))
    if isinstance(expr, Repeat):
        return Repeat(_with_gaps(expr.item, gap), expr.low, expr.high)
    return expr


def _gapped(expr: Expr, gap: Expr) -> Expr:
    """`expr` with `gap` allowed before it, and before each of its parts: pushed into
    options and repetitions, so that a part that is left out leaves no gap behind."""
    if isinstance(expr, Seq):
        return Seq(tuple(_gapped(item, gap) for item in expr.items))
    if isinstance(expr, Alt):
        return Alt(tuple(_gapped(option, gap) for option in expr.options))
    if isinstance(expr, Repeat):
        return Repeat(_gapped(expr.item, gap), expr.low, expr.high)
    return Seq((gap, expr))


def _less(high: int | None) -> int | None:
    return None if high is None else high - 1
