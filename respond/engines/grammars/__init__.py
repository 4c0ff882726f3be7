"""Custom tools' grammars (`format: {"type": "grammar", "syntax": "lark" | "regex"}`).

`parse_grammar` turns a definition into a `Grammar` (or raises GrammarError saying what is
wrong with it); `gbnf_rules` writes it as GBNF for llama.cpp, as raw text or as the inside
of a JSON string; `mismatch` checks a finished input against the definition (Python's `re`
for a regex, an Earley recognizer over the same Grammar for Lark), for engines that cannot
constrain decoding.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from respond.engines.grammars._ir import Grammar, GrammarError, to_gbnf
from respond.engines.grammars._lark import lark_grammar
from respond.engines.grammars._match import Recognizer
from respond.engines.grammars._regex import regex_grammar

__all__ = ["Grammar", "GrammarError", "Syntax", "gbnf_rules", "mismatch", "parse_grammar"]

Syntax = Literal["lark", "regex"]


def parse_grammar(syntax: Syntax, definition: str, *, max_repeat: int) -> Grammar:
    """The Grammar of `definition`; GrammarError if it is malformed or cannot be enforced.
    `max_repeat`: the largest repetition bound allowed ({m,n}, ~ n..m)."""
    if syntax == "regex":
        grammar = regex_grammar(definition, max_repeat=max_repeat)
        try:  # what the upstream check (`mismatch`) matches with must take it too
            re.compile(definition)
        except (re.error, OverflowError) as exc:
            raise GrammarError(f"Python's re refuses it: {exc}") from None
        return grammar
    return lark_grammar(definition, max_repeat=max_repeat)


def gbnf_rules(
    grammar: Grammar, prefix: str, mode: Literal["raw", "json"]
) -> tuple[str, dict[str, str]]:
    """(the rule for the whole text, every rule by name), each name starting `prefix-`.
    mode "json": the text as it is written inside a JSON string (escaped)."""
    return to_gbnf(grammar, prefix, mode)


def mismatch(syntax: Syntax, definition: str, text: str) -> str | None:
    """Why `text` is not in the language of `definition` (a grammar `parse_grammar`
    took); None when it is."""
    if syntax == "regex":
        return None if re.fullmatch(definition, text) else "it does not match the regex"
    if _recognizer(definition).matches(text):
        return None
    return "it does not parse under the Lark grammar"


@functools.lru_cache(maxsize=64)
def _recognizer(definition: str) -> Recognizer:
    # Codex sends the same apply_patch grammar with every request: built once.
    return Recognizer(lark_grammar(definition, max_repeat=10**9))
