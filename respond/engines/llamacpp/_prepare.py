"""Prepare-time work of the embedded engine: the decoding plan, its grammars built and parsed.

This runs in a worker before anything is streamed, so whatever llama.cpp's JSON-Schema
converter or its grammar parser rejects is a 400 for the client rather than a failed
response (or, for a deeply nested grammar, a crash: parsing happens on a big stack, see
_native.py). The plan is kept in `turn.prepared`, so generation builds nothing again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import llama_cpp

from respond.engines._base import ChatTurn, ConstraintError
from respond.engines._tools import visible_tools
from respond.engines.formats import ChatFormat, Think
from respond.engines.llamacpp._decoding import DecodingPlan, arguments_schema, plan_decoding
from respond.engines.llamacpp._grammar import CallLead, CallSpec, output_grammar
from respond.engines.llamacpp._native import on_big_stack
from respond.protocol.limits import Limits

__all__ = ["checked_plan"]

MAX_GRAMMAR_BYTES = Limits.grammar_bytes


def checked_plan(
    turn: ChatTurn,
    chat_format: ChatFormat,
    think: Think | None,
    prompt_tail: str,
    vocab: Any,
    lead: CallLead | None = None,
) -> DecodingPlan:
    """The turn's decoding plan, each grammar in it known to parse; else ConstraintError
    naming the schema that is at fault (blocking: call it from a worker)."""
    try:
        plan = plan_decoding(turn, chat_format, think, prompt_tail, lead)
        grammars = [g for g in (plan.grammar, plan.call_grammar) if g is not None]
        problems = [_grammar_problem(grammar, vocab) for grammar in grammars]
    except Exception as exc:  # the converter reports what it cannot convert by any exception
        problems = [(_unconvertible(exc), "invalid_json_schema")]
    failed = next((p for p in problems if p is not None), None)
    if failed is None:
        return plan
    raise _culprit(turn, chat_format, vocab) or ConstraintError(
        f"The grammar for this request's tools and text format together is refused: {failed[0]}.",
        code=failed[1],
    )


def _unconvertible(exc: Exception) -> str:
    return f"it cannot be turned into a grammar ({type(exc).__name__}: {exc})"


def _grammar_problem(grammar: str, vocab: Any) -> tuple[str, str] | None:
    """(why, code) if llama.cpp would not take `grammar`."""
    size = len(grammar.encode("utf-8"))
    if size > MAX_GRAMMAR_BYTES:
        return (
            f"the grammar that enforces it is {size} bytes, over the limit of "
            f"{MAX_GRAMMAR_BYTES} (smaller bounds, enums or patterns make it smaller)",
            "invalid_json_schema",
        )
    if not on_big_stack(lambda: _parses(grammar, vocab)):
        return (
            "llama.cpp's grammar parser rejects the grammar that enforces it "
            "(too many repetitions, or a rule that refers to itself before any character)",
            "invalid_grammar",
        )
    return None


def _parses(grammar: str, vocab: Any) -> bool:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def _culprit(turn: ChatTurn, chat_format: ChatFormat, vocab: Any) -> ConstraintError | None:
    """The first schema that fails alone: the text format's, then each strict tool's."""
    for tool, build in _parts(turn, chat_format):
        try:
            problem = _grammar_problem(build(), vocab)
        except Exception as exc:
            problem = (_unconvertible(exc), "invalid_json_schema")
        if problem is not None:
            what = "the text format's schema" if tool is None else f"the schema of tool '{tool}'"
            return ConstraintError(
                f"Invalid schema: {what} is refused: {problem[0]}.",
                code=problem[1],
                tool=tool,
            )
    return None


def _parts(turn: ChatTurn, chat_format: ChatFormat) -> list[tuple[str | None, Callable[[], str]]]:
    parts: list[tuple[str | None, Callable[[], str]]] = []
    schema = turn.json_schema
    if schema is not None:
        parts.append((None, lambda: output_grammar(json_output=True, schema=schema)))
    for spec in visible_tools(turn):
        if spec.strict:
            call = CallSpec(spec.name, arguments_schema(spec))
            parts.append((spec.name, _call_grammar(call, chat_format)))
    return parts


def _call_grammar(call: CallSpec, chat_format: ChatFormat) -> Callable[[], str]:
    return lambda: output_grammar(chat_format=chat_format, calls=[call])
