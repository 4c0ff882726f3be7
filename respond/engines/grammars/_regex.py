"""Regular expressions (Python's `re` syntax, the part a grammar can enforce) to a Grammar.

The whole input must match, as with `re.fullmatch`: `^` may open a branch and `$` close
it, and mean nothing more. Covered: literals and escapes, `.` (any character but a
newline), `\\d \\w \\s` and their negations (ASCII: `\\d` is [0-9]), bracket classes with
ranges and negation, groups (capturing, named or not), alternation, and the quantifiers
`? * + {m} {m,} {m,n}`; a lazy quantifier (`*?`) matches the same strings as a greedy one.
What depends on more than the characters themselves (backreferences, lookaround, word
boundaries, inline flags) is refused with GrammarError.
"""

from __future__ import annotations

from respond.engines.grammars._ir import (
    MAX_CHAR,
    Alt,
    Chars,
    Expr,
    Grammar,
    GrammarError,
    Lit,
    Repeat,
    Seq,
    chars_of,
    complement,
)

__all__ = ["regex_expr", "regex_grammar"]

_DIGIT = chars_of([(ord("0"), ord("9"))])
_WORD = chars_of([(ord("a"), ord("z")), (ord("A"), ord("Z")), (ord("0"), ord("9")), (95, 95)])
_SPACE = chars_of([(ord(c), ord(c)) for c in " \t\n\r\f\v"])
_SHORTHANDS = {
    "d": _DIGIT,
    "w": _WORD,
    "s": _SPACE,
    "D": complement(_DIGIT),
    "W": complement(_WORD),
    "S": complement(_SPACE),
}
_ANY_BUT_NEWLINE = complement(chars_of([(10, 10)]))
_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "0": "\0"}
_REFUSED_ESCAPES = {
    "b": "word boundaries (\\b)",
    "B": "word boundaries (\\B)",
    "k": "backreferences",
    "p": "Unicode property classes (\\p)",
    "P": "Unicode property classes (\\P)",
    "G": "\\G",
}


def regex_grammar(pattern: str, *, max_repeat: int) -> Grammar:
    """The Grammar of the strings `pattern` fully matches."""
    return Grammar({"start": regex_expr(pattern, max_repeat=max_repeat)})


def regex_expr(pattern: str, *, max_repeat: int) -> Expr:
    parser = _Parser(pattern, max_repeat)
    expr = parser.alternation()
    if parser.pos < len(pattern):  # only an unopened ')' stops the top level early
        raise parser.error("unbalanced parenthesis")
    return expr


class _Parser:
    def __init__(self, pattern: str, max_repeat: int) -> None:
        self.text, self.pos, self.max_repeat = pattern, 0, max_repeat

    def error(self, why: str) -> GrammarError:
        return GrammarError(f"{why} at position {self.pos}")

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise self.error("the pattern ends too early")
        self.pos += 1
        return char

    # ------------------------------------------------------------ structure

    def alternation(self) -> Expr:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> Expr:
        items: list[Expr] = []
        if self.peek() == "^" or self.text.startswith("\\A", self.pos):
            self.pos += 1 if self.peek() == "^" else 2
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "$" or self.text.startswith(("\\Z", "\\z"), self.pos):
                self.pos += 1 if self.peek() == "$" else 2
                if self.peek() not in ("", "|", ")"):
                    raise self.error("'$' may only end the pattern or a branch")
                break
            if self.peek() == "^":
                raise self.error("'^' may only start the pattern or a branch")
            item = self.quantified(self.atom())
            if items and isinstance(item, Lit) and isinstance(items[-1], Lit):
                items[-1] = Lit(items[-1].text + item.text)
            else:
                items.append(item)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantified(self, atom: Expr) -> Expr:
        bounds = self.quantifier()
        if bounds is None:
            return atom
        if self.peek() == "?":  # lazy: the same strings match
            self.pos += 1
        elif self.peek() == "+":
            raise self.error("possessive quantifiers are not supported")
        if self.quantifier_ahead():
            raise self.error("multiple repeat")
        return Repeat(atom, *bounds)

    def quantifier_ahead(self) -> bool:
        return self.peek() in ("?", "*", "+") or self._braces() is not None

    def quantifier(self) -> tuple[int, int | None] | None:
        char = self.peek()
        if char in ("?", "*", "+"):
            self.pos += 1
            return {"?": (0, 1), "*": (0, None), "+": (1, None)}[char]
        braces = self._braces()
        if braces is None:
            return None
        bounds, length = braces
        self.pos += length
        low, high = bounds
        for bound in (low, high):
            if bound is not None and bound > self.max_repeat:
                raise self.error(f"the bound {bound} is over the limit of {self.max_repeat}")
        if high is not None and high < low:
            raise self.error("a {m,n} bound with n below m")
        return bounds

    def _braces(self) -> tuple[tuple[int, int | None], int] | None:
        """{m} {m,} {,n} {m,n} at the position: (bounds, length); else None (a literal '{')."""
        if self.peek() != "{":
            return None
        end = self.text.find("}", self.pos)
        if end < 0:
            return None
        inside = self.text[self.pos + 1 : end]
        low, comma, high = inside.partition(",")
        if not (low.isdigit() or (comma and not low)) or not (high.isdigit() or not high):
            return None
        if not low and not high:
            return None
        bounds = (int(low or 0), int(high) if high else (None if comma else int(low)))
        return bounds, end - self.pos + 1

    # ------------------------------------------------------------ atoms

    def atom(self) -> Expr:
        char = self.peek()
        if char in ("*", "+", "?") or self._braces() is not None:
            raise self.error("nothing to repeat")
        if char == "(":
            return self.group()
        if char == "[":
            return self.bracket()
        self.pos += 1
        if char == ".":
            return _ANY_BUT_NEWLINE
        if char == "\\":
            return self.escape(in_class=False)
        return Lit(char)

    def group(self) -> Expr:
        self.pos += 1
        if self.peek() == "?":
            self._group_kind()
        inner = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern")
        self.pos += 1
        return inner

    def _group_kind(self) -> None:
        ahead = self.text[self.pos : self.pos + 4]
        if ahead.startswith("?:"):
            self.pos += 2
        elif ahead.startswith(("?P<", "?<")) and not ahead.startswith(("?<=", "?<!")):
            end = self.text.find(">", self.pos)
            if end < 0:
                raise self.error("unterminated group name")
            self.pos = end + 1
        elif ahead.startswith(("?=", "?!", "?<=", "?<!")):
            raise self.error("lookaround ('(?=', '(?!', '(?<=', '(?<!') cannot be enforced")
        elif ahead.startswith("?P="):
            raise self.error("backreferences cannot be enforced")
        else:
            raise self.error("inline flags and other '(?' groups are not supported")

    def escape(self, *, in_class: bool) -> Expr:
        char = self.take()
        if char in _SHORTHANDS:
            return _SHORTHANDS[char]
        code = self.escaped_code(char, in_class=in_class)
        return Lit(chr(code))

    def escaped_code(self, char: str, *, in_class: bool) -> int:
        """The code point an escape (after its backslash) stands for."""
        if char == "b" and in_class:
            return 8
        if char.isdigit() and char != "0":
            raise self.error("backreferences cannot be enforced")
        if char in _CONTROL_ESCAPES:
            return ord(_CONTROL_ESCAPES[char])
        if char in _REFUSED_ESCAPES:
            raise self.error(f"{_REFUSED_ESCAPES[char]} cannot be enforced")
        for letter, size in (("x", 2), ("u", 4), ("U", 8)):
            if char == letter:
                digits = self.text[self.pos : self.pos + size]
                if len(digits) != size or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise self.error(f"\\{letter} needs {size} hexadecimal digits")
                self.pos += size
                code = int(digits, 16)
                if code > MAX_CHAR:
                    raise self.error("a code point past U+10FFFF")
                return code
        if char.isalnum():
            raise self.error(f"unknown escape \\{char}")
        return ord(char)

    def bracket(self) -> Chars:
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while first or self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character set")
            first = False
            low = self.class_item(ranges)
            if low is None:
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self.class_item(ranges)
                if high is None:
                    raise self.error("a range cannot end in a class like \\d")
                if high < low:
                    raise self.error("bad character range")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        self.pos += 1
        chars = chars_of(ranges)
        return complement(chars) if negated else chars

    def class_item(self, ranges: list[tuple[int, int]]) -> int | None:
        """One member of a bracket class: its code point, or None when it was a whole
        class (\\d, \\s...) already added to `ranges`."""
        char = self.take()
        if char != "\\":
            return ord(char)
        escaped = self.take()
        if escaped in _SHORTHANDS:
            ranges.extend(_SHORTHANDS[escaped].ranges)
            return None
        return self.escaped_code(escaped, in_class=True)
