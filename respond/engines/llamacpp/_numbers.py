"""Numeric JSON Schema keywords as grammar rules: bounds and multipleOf.

llama-cpp-python's converter ignores minimum, maximum, exclusiveMinimum, exclusiveMaximum
and multipleOf. Here they become digit rules, the way llama.cpp's own converter writes
integer ranges: a range of digit strings of one length is split into a shared prefix, one
digit range and free digits ("1" [3-9] [0-9]{2} is 130..199...). On top of that:

- numbers: the integer part is such a range, and the fraction at either end of the range
  is compared digit by digit with the bound's fraction (numbers are written without an
  exponent when bounded);
- multipleOf k (an integer): the free digits track the remainder modulo k, one rule per
  (digits left, remainder); multipleOf 10^-d on numbers: at most d decimals.

Bounds at or beyond +-(2^53-1) (zod's `z.number().int()` sends them) add nothing: integers
here already have at most 16 digits, and JSON numbers beyond 2^53 are not exact anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["NUMERIC_KEYWORDS", "numeric_problem", "numeric_rule"]

NUMERIC_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
SAFE = 2**53 - 1
DIGITS = 16  # integer digits, as the converter's own integral-part rule allows
DECIMALS = 16  # fraction digits, as the converter's decimal-part rule allows
TOP: int = 10**DIGITS - 1
MAX_STEP = 100  # a whole multipleOf costs 15 rules per unit of it

AddRule = Callable[[str, str], str]  # (wanted name, body) -> the name it got


@dataclass(frozen=True)
class _Bound:
    value: Fraction
    open: bool  # exclusive


def _number(value: Any) -> Fraction | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _bounds(schema: Mapping[str, Any]) -> tuple[_Bound | None, _Bound | None]:
    """The tightest (low, high); bounds at or beyond +-(2^53-1) are no bound."""
    low: _Bound | None = None
    high: _Bound | None = None
    for keyword, is_open in (("minimum", False), ("exclusiveMinimum", True)):
        value = _number(schema.get(keyword))
        if value is not None and value > -SAFE:
            bound = _Bound(value, is_open)
            if low is None or (value, is_open) > (low.value, low.open):
                low = bound
    for keyword, is_open in (("maximum", False), ("exclusiveMaximum", True)):
        value = _number(schema.get(keyword))
        if value is not None and value < SAFE:
            bound = _Bound(value, is_open)
            if high is None or (-value, is_open) > (-high.value, high.open):
                high = bound
    return low, high


def _step(schema: Mapping[str, Any]) -> Fraction | None:
    return _number(schema.get("multipleOf"))


def numeric_problem(schema: Mapping[str, Any]) -> str | None:
    """Why the numeric keywords of `schema` cannot be enforced (None: they can)."""
    for keyword in NUMERIC_KEYWORDS & schema.keys():
        if _number(schema[keyword]) is None:
            return f"{keyword}: not a number"
    step = _step(schema)
    if step is not None:
        if step <= 0:
            return "multipleOf: not positive"
        if _integer_step(schema, step) is None and _decimals(step) is None:
            return f"multipleOf: {schema['multipleOf']}"
    low, high = _bounds(schema)
    if low is not None and high is not None and _empty(schema, low, high):
        return "minimum/maximum: no value fits"
    return None


def _integer_step(schema: Mapping[str, Any], step: Fraction) -> int | None:
    """multipleOf as a whole-number step, for integers (any step p/q: multiples of p) and
    for numbers with a whole step; None when it is not one or too large."""
    if schema.get("type") == "integer" or step.denominator == 1:
        whole = step.numerator
    else:
        return None
    return whole if whole <= MAX_STEP else None


def _decimals(step: Fraction) -> int | None:
    """d when step is 10^-d (a number with at most d decimals)."""
    for digits in range(1, DECIMALS + 1):
        if step == Fraction(1, 10**digits):
            return digits
    return None


def _empty(schema: Mapping[str, Any], low: _Bound, high: _Bound) -> bool:
    step = _step(schema)
    whole = _integer_step(schema, step) if step is not None else None
    if schema.get("type") == "integer" or whole is not None:
        first, last = _int_low(low), _int_high(high)
        # No whole value, or no multiple of the step, between the bounds.
        return first > last or -((-first) // (whole or 1)) * (whole or 1) > last
    if low.value == high.value:
        return low.open or high.open
    return low.value > high.value


def _int_low(bound: _Bound | None) -> int:
    if bound is None:
        return -TOP
    return _floor(bound.value) + 1 if bound.open else -_floor(-bound.value)


def _int_high(bound: _Bound | None) -> int:
    if bound is None:
        return TOP
    return -_floor(-bound.value) - 1 if bound.open else _floor(bound.value)


def _floor(value: Fraction) -> int:
    return value.numerator // value.denominator


def numeric_rule(schema: Mapping[str, Any], name: str, add: AddRule) -> str | None:
    """A rule body for an integer or number schema with numeric keywords (None: the
    converter's own rule is exact, e.g. only bounds at +-(2^53-1))."""
    kind = schema.get("type")
    if kind not in ("integer", "number") or numeric_problem(schema) is not None:
        return None
    low, high = _bounds(schema)
    step = _step(schema)
    whole = _integer_step(schema, step) if step is not None else None
    decimals = _decimals(step) if step is not None and whole is None else None
    if kind == "integer" or whole is not None:
        if low is None and high is None and (whole is None or whole == 1):
            return None
        body = _integers(_int_low(low), _int_high(high), whole or 1, name, add)
    elif low is None and high is None and decimals is None:
        return None
    else:
        body = _Numbers(name, add, decimals or DECIMALS).rule(low, high)
    return f"( {body} ) space"


# ---------------------------------------------------------------- integers


@dataclass(frozen=True)
class _Digits:
    """Digit strings of one length: `prefix`, then one of `first`..`last` (if set), then
    `free` digits of any value."""

    prefix: str
    first: str = ""
    last: str = ""
    free: int = 0


def _one_length(low: str, high: str) -> list[_Digits]:
    """low..high, two digit strings of the same length, as _Digits patterns."""
    if low == high:
        return [_Digits(low)]
    same = 0
    while low[same] == high[same]:
        same += 1
    prefix, a, b = low[:same], low[same], high[same]
    rest = len(low) - same - 1
    low_rest, high_rest = low[same + 1 :], high[same + 1 :]
    out: list[_Digits] = []
    first = a if low_rest == "0" * rest else chr(ord(a) + 1)
    last = b if high_rest == "9" * rest else chr(ord(b) - 1)
    if first != a:
        out += [_with(prefix + a, d) for d in _one_length(low_rest, "9" * rest)]
    if first <= last:
        out.append(_Digits(prefix, first, last, rest))
    if last != b:
        out += [_with(prefix + b, d) for d in _one_length("0" * rest, high_rest)]
    return out


def _with(prefix: str, digits: _Digits) -> _Digits:
    return _Digits(prefix + digits.prefix, digits.first, digits.last, digits.free)


def _magnitudes(low: int, high: int) -> list[_Digits]:
    """low..high (0 <= low <= high) as patterns, without leading zeros."""
    out: list[_Digits] = []
    for length in range(len(str(low)), len(str(high)) + 1):
        start = max(low, 10 ** (length - 1) if length > 1 else 0)
        end = min(high, 10**length - 1)
        if start <= end:
            out += _one_length(str(start), str(end))
    return out


def _integers(low: int, high: int, step: int, name: str, add: AddRule) -> str:
    """The integers low..high that are multiples of step."""
    sides = []
    if low < 0:
        sides.append(("-", max(1, -high), -low))
    if high >= 0:
        sides.append(("", max(0, low), high))
    alternatives = []
    remainders = _Remainders(step, name, add)
    for sign, start, end in sides:
        if start > end:
            continue
        patterns = _magnitudes(start, end)
        parts = _plain(patterns) if step == 1 else remainders.of(patterns)
        head = f'"{sign}" ' if sign else ""
        alternatives += [f"{head}{part}" for part in parts]
    return " | ".join(alternatives)


def _plain(patterns: list[_Digits]) -> list[str]:
    out: list[str] = []
    merged: list[int] = []  # free counts of consecutive "[1-9] [0-9]{n}" patterns
    for pattern in patterns:
        if pattern.prefix == "" and (pattern.first, pattern.last) == ("1", "9"):
            merged.append(pattern.free)
            continue
        out.append(_render(pattern))
    if merged:
        out.append(f"[1-9] {_free(min(merged), max(merged))}".rstrip())
    return out


def _render(pattern: _Digits) -> str:
    pieces = [f'"{pattern.prefix}"'] if pattern.prefix else []
    if pattern.first:
        pieces.append(_range(pattern.first, pattern.last))
    if pattern.free:
        pieces.append(_free(pattern.free, pattern.free))
    return " ".join(pieces)


def _range(first: str, last: str) -> str:
    return f"[{first}]" if first == last else f"[{first}-{last}]"


def _free(least: int, most: int) -> str:
    if most == 0:
        return ""
    if least == most:
        return f"[0-9]{{{least}}}"
    return f"[0-9]{{{least},{most}}}"


class _Remainders:
    """Patterns restricted to multiples of `step`: the free digits carry the remainder."""

    def __init__(self, step: int, name: str, add: AddRule) -> None:
        self.step = step
        self.name = name
        self.add = add
        self.rules: dict[tuple[int, int], str | None] = {}

    def of(self, patterns: list[_Digits]) -> list[str]:
        out = []
        for pattern in patterns:
            head = int(pattern.prefix or "0") % self.step
            if not pattern.first:
                if head == 0:
                    out.append(f'"{pattern.prefix}"')
                continue
            for digit in range(int(pattern.first), int(pattern.last) + 1):
                tail = self.tail(pattern.free, (head * 10 + digit) % self.step)
                if tail is not None:
                    lead = _render(_Digits(pattern.prefix + str(digit)))
                    out.append(f"{lead} {tail}".rstrip())
        return out

    def tail(self, left: int, remainder: int) -> str | None:
        """A rule for `left` more digits taking `remainder` to 0 ("" when none are left)."""
        if left == 0:
            return "" if remainder == 0 else None
        key = (left, remainder)
        if key not in self.rules:
            self.rules[key] = None  # being built
            by_next: dict[int, list[int]] = {}
            for digit in range(10):
                by_next.setdefault((remainder * 10 + digit) % self.step, []).append(digit)
            alternatives = []
            for target, digits in sorted(by_next.items()):
                rest = self.tail(left - 1, target)
                if rest is not None:
                    alternatives.append(f"{_digit_set(digits)} {rest}".rstrip())
            body = " | ".join(alternatives)
            self.rules[key] = self.add(f"{self.name}-mod-{left}-{remainder}", body)
        return self.rules[key]


def _digit_set(digits: list[int]) -> str:
    return "[" + "".join(str(d) for d in digits) + "]"


# ---------------------------------------------------------------- numbers


def _split(value: Fraction) -> tuple[int, str]:
    """(integer part, fraction digits without trailing zeros) of a value >= 0."""
    whole = _floor(value)
    rest = value - whole
    digits = ""
    while rest and len(digits) < DECIMALS + 2:
        rest *= 10
        digit = _floor(rest)
        digits += str(digit)
        rest -= digit
    return whole, digits


class _Numbers:
    """Numbers between two bounds, written as decimals: sign, integer part, fraction."""

    def __init__(self, name: str, add: AddRule, decimals: int) -> None:
        self.name = name
        self.add = add
        self.decimals = decimals
        self.rules: dict[tuple[Any, ...], tuple[str | None, bool]] = {}

    def rule(self, low: _Bound | None, high: _Bound | None) -> str:
        alternatives = []
        if low is None or low.value < 0:
            # Negative values: a magnitude above max(0, -high), up to -low.
            if high is not None and high.value < 0:
                magnitude_low = _Bound(-high.value, high.open)
            else:
                magnitude_low = _Bound(Fraction(0), True)  # no "-0"
            magnitude_high = None if low is None else _Bound(-low.value, low.open)
            negative = self.magnitude(magnitude_low, magnitude_high)
            if negative:
                alternatives.append(f'"-" ( {negative} )')
        if high is None or high.value > 0 or (high.value == 0 and not high.open):
            start = low if low is not None and low.value >= 0 else _Bound(Fraction(0), False)
            positive = self.magnitude(start, high)
            if positive:
                alternatives.append(positive)
        return " | ".join(alternatives)

    def magnitude(self, low: _Bound, high: _Bound | None) -> str:
        """Values from low (>= 0) up to high (None: any 16-digit integer part)."""
        low_int, low_digits = _split(low.value)
        if high is not None and _split(high.value)[0] == low_int:
            # One integer part: the fraction lies between both bounds' fractions.
            fraction = self.fraction(low_digits, low.open, _split(high.value)[1], high.open)
            return "" if fraction is None else f'"{low_int}" {fraction}'.rstrip()
        out = []
        fraction = self.fraction(low_digits, low.open, None, False)
        if fraction is not None:
            out.append(f'"{low_int}" {fraction}'.rstrip())
        last = TOP if high is None else _split(high.value)[0] - 1
        if low_int + 1 <= last:
            middle = " | ".join(_plain(_magnitudes(low_int + 1, last)))
            out.append(f"( {middle} ) {self.fraction(None, False, None, False)}")
        if high is not None:
            high_int, high_digits = _split(high.value)
            fraction = self.fraction(None, False, high_digits, high.open)
            if fraction is not None:
                out.append(f'"{high_int}" {fraction}'.rstrip())
        return " | ".join(out)

    def fraction(
        self, low: str | None, low_open: bool, high: str | None, high_open: bool
    ) -> str | None:
        """The optional "." and digits whose value 0.D is above low and below high (digit
        strings; None: no bound); None when no fraction fits."""
        digits, empty_ok = self.digits(low, low_open, high, high_open, self.decimals)
        if digits is None:
            return "" if empty_ok else None
        return f'( "." {digits} )?' if empty_ok else f'"." {digits}'

    def digits(
        self, low: str | None, low_open: bool, high: str | None, high_open: bool, room: int
    ) -> tuple[str | None, bool]:
        """(a rule for 1..room digits D with low < 0.D < high, whether no digits fit too)."""
        if low == "" and not low_open:
            low = None  # at least 0: no bound
        empty_ok = (low is None or (low == "" and not low_open)) and (
            high is None or high != "" or not high_open
        )
        if room == 0:
            return None, empty_ok
        if low is None and high is None:
            return f"[0-9]{{1,{room}}}" if room > 1 else "[0-9]", True
        key = (low, low_open, high, high_open, room)
        if key in self.rules:
            return self.rules[key]
        groups: dict[tuple[str | None, str | None], list[int]] = {}
        for digit in range(10):
            state = self._next(digit, low, high)
            if state is not None:
                groups.setdefault(state, []).append(digit)
        alternatives = []
        for (next_low, next_high), chosen in groups.items():
            rest, rest_empty = self.digits(next_low, low_open, next_high, high_open, room - 1)
            head = _digit_set(chosen)
            if rest is not None:
                alternatives.append(f"{head} ( {rest} )?" if rest_empty else f"{head} {rest}")
            elif rest_empty:
                alternatives.append(head)
        if not alternatives:
            result: tuple[str | None, bool] = (None, empty_ok)
        else:
            name = self.add(f"{self.name}-frac-{len(self.rules)}", " | ".join(alternatives))
            result = (name, empty_ok)
        self.rules[key] = result
        return result

    @staticmethod
    def _next(
        digit: int, low: str | None, high: str | None
    ) -> tuple[str | None, str | None] | None:
        """The bounds left for the digits after `digit` (None: `digit` breaks a bound)."""
        next_low: str | None = None
        next_high: str | None = None
        if low is not None:
            first = int(low[0]) if low else 0
            if digit < first:
                return None
            next_low = low[1:] if digit == first else None
        if high is not None:
            first = int(high[0]) if high else 0
            if digit > first:
                return None
            next_high = high[1:] if digit == first else None
        return next_low, next_high
