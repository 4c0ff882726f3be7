"""Schemas real clients send (Claude Code's tools) that llama.cpp's converter mishandles."""

from __future__ import annotations

from typing import Any

import pytest

from respond.engines.llamacpp._grammar import CallSpec, output_grammar, unsupported_keyword
from tests.native.test_grammar import vocab
from tests.support.gbnf import compiles

__all__ = ["vocab"]  # the fixture, shared with test_grammar

# Claude Code's Workflow tool: `args` is any JSON value, given only a description.
WORKFLOW = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "args": {"description": "Any JSON value, passed on verbatim."},
        "extra": {},
        "list": {"type": "array", "items": {}},
    },
    "additionalProperties": False,
}


def test_an_untyped_subschema_is_any_json_value(vocab: Any) -> None:
    grammar = output_grammar(calls=[CallSpec("Workflow", WORKFLOW)])
    assert compiles(vocab, grammar)
    for rule in ("fn0-args", "fn0-extra", "fn0-list-item"):
        line = next(x for x in grammar.splitlines() if x.startswith(f"{rule} ::= "))
        for kind in ("array", "boolean", "integer", "null", "number", "string"):
            assert kind in line, line


@pytest.mark.parametrize("keyword", ["maxLength", "minLength", "maxItems", "minItems"])
def test_bounds_too_large_for_a_grammar_are_not_enforced(keyword: str) -> None:
    kind = "string" if "Length" in keyword else "array"
    schema = {"type": "object", "properties": {"s": {"type": kind, keyword: 524288}}}
    assert unsupported_keyword(schema) == (
        f"{keyword}: 524288 (above 1000)",
        f"properties.s.{keyword}",
    )
    assert unsupported_keyword({"type": kind, keyword: 1000}) is None
