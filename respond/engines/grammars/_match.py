"""Whether a text is in a Grammar's language: an Earley recognizer over characters.

For upstreams, which cannot be made to decode under a grammar: their custom tool inputs
are checked here against the very Grammar the embedded engine decodes under. (The `lark`
package cannot be the judge: it refuses grammars OpenAI takes, such as Codex's
`apply_patch`, whose `/(.*)/` matches the empty string.)

The Grammar is first flattened to plain productions (a symbol is a rule name or a `Chars`),
then run by Earley's algorithm with Aycock and Horspool's step for rules that derive the
empty text, so any context-free grammar works, left recursion included.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence

from respond.engines.grammars._ir import Alt, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq

__all__ = ["Recognizer"]

Symbol = str | Chars
_Item = tuple[int, int, int]  # (production, dot, origin)


class Recognizer:
    def __init__(self, grammar: Grammar) -> None:
        self.productions: list[tuple[str, tuple[Symbol, ...]]] = []
        self.by_head: dict[str, list[int]] = defaultdict(list)
        self._fresh = 0
        for name, expr in grammar.rules.items():
            self._add(name, self._symbols(expr))
        self.start = grammar.start
        self.nullable = self._nullable()
        self._lows: dict[int, list[int]] = {}  # each Chars' range starts, for bisect
        for _, body in self.productions:
            for symbol in body:
                if isinstance(symbol, Chars):
                    self._lows[id(symbol)] = [low for low, _ in symbol.ranges]

    def matches(self, text: str) -> bool:
        sets: list[dict[_Item, None]] = [{} for _ in range(len(text) + 1)]
        for production in self.by_head[self.start]:
            sets[0][(production, 0, 0)] = None
        waiting: list[dict[str, list[_Item]]] = []
        for position in range(len(text) + 1):
            waiting.append(defaultdict(list))
            char = text[position] if position < len(text) else None
            self._step(sets, waiting, position, char)
            if position < len(text) and not sets[position + 1]:
                return False
        return any(self._whole(item) for item in sets[len(text)])

    def _whole(self, item: _Item) -> bool:
        """Whether `item` is the start rule, complete, from the first character on."""
        production, dot, origin = item
        head, body = self.productions[production]
        return head == self.start and dot == len(body) and origin == 0

    def _step(
        self,
        sets: list[dict[_Item, None]],
        waiting: list[dict[str, list[_Item]]],
        position: int,
        char: str | None,
    ) -> None:
        current = sets[position]
        agenda = list(current)
        index = 0
        while index < len(agenda):
            item = agenda[index]
            index += 1
            production, dot, origin = item
            head, body = self.productions[production]
            found: list[_Item] = []
            if dot == len(body):  # complete: advance whoever waited for `head` at origin
                found = [(p, d + 1, o) for p, d, o in waiting[origin].get(head, ())]
            elif isinstance(body[dot], str):
                wanted = body[dot]
                assert isinstance(wanted, str)
                waiting[position][wanted].append(item)
                found = [(p, 0, position) for p in self.by_head[wanted]]
                if wanted in self.nullable:
                    found.append((production, dot + 1, origin))
            elif char is not None and self._has(body[dot], char):
                sets[position + 1][(production, dot + 1, origin)] = None
            for new in found:
                if new not in current:
                    current[new] = None
                    agenda.append(new)

    def _has(self, symbol: Symbol, char: str) -> bool:
        assert isinstance(symbol, Chars)
        code = ord(char)
        at = bisect.bisect_right(self._lows[id(symbol)], code) - 1
        return at >= 0 and symbol.ranges[at][1] >= code

    # ------------------------------------------------------------ flattening

    def _add(self, head: str, body: Sequence[Symbol]) -> None:
        self.by_head[head].append(len(self.productions))
        self.productions.append((head, tuple(body)))

    def _new(self, bodies: Sequence[Sequence[Symbol]]) -> str:
        self._fresh += 1
        name = f" {self._fresh}"  # a space: no rule of the grammar is named so
        for body in bodies:
            self._add(name, body)
        return name

    def _symbols(self, expr: Expr) -> tuple[Symbol, ...]:
        if isinstance(expr, Lit):
            return tuple(Chars(((ord(c), ord(c)),)) for c in expr.text)
        if isinstance(expr, Chars):
            return (expr,)
        if isinstance(expr, Ref):
            return (expr.name,)
        if isinstance(expr, Seq):
            return tuple(symbol for item in expr.items for symbol in self._symbols(item))
        if isinstance(expr, Alt):
            return (self._new([self._symbols(option) for option in expr.options]),)
        return self._repeat(expr)

    def _repeat(self, expr: Repeat) -> tuple[Symbol, ...]:
        one = self._symbols(expr.item)
        if len(one) != 1:
            one = (self._new([one]),)
        head = one * expr.low
        if expr.high is None:
            name = self._new([()])
            self._add(name, (name, *one))  # left recursive: Earley's cheapest loop
            return (*head, name)
        tail: tuple[Symbol, ...] = ()
        for _ in range(expr.high - expr.low):
            tail = (self._new([(), (*one, *tail)]),)
        return (*head, *tail)

    def _nullable(self) -> set[str]:
        nullable: set[str] = set()
        changed = True
        while changed:
            changed = False
            for head, body in self.productions:
                if head not in nullable and all(s in nullable for s in body):
                    nullable.add(head)
                    changed = True
        return nullable
