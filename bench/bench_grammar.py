"""The cost of constrained decoding: tokens/s with a JSON-Schema grammar vs without.

Same model, same prompts, same run, rounds alternating so drift hits every arm:

- free:     respond's engine, no grammar (text output)
- schema:   respond's engine with text.format json_schema (grammar-first sampling: the
            sampled token is checked against the grammar, the whole vocabulary only when
            it is rejected)
- stock:    the same grammar through llama-cpp-python's own sampler chain (the grammar
            applied to every vocabulary entry at every step), for reference

Decode tokens/s is counted from the first to the last generated token.

`--custom` measures a custom tool's grammar instead (engines/grammars: Lark and regex
converted to GBNF), a forced call of one custom tool each arm:

- text:     the custom tool without a grammar (its input any JSON string)
- lark:     the same tool with a Lark grammar (arithmetic, with %ignore WS)
- regex:    the same tool with a regex (a date)

and how long building and parsing each call's grammar takes (prepare ms).

    .venv/bin/python bench/bench_grammar.py [--rounds 3] [--tokens 128] [--custom]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_cpp import Llama
from llama_cpp.llama_grammar import LlamaGrammar

from respond.engines import (
    ChatMessage,
    ChatTurn,
    FunctionSpec,
    InputGrammar,
    Sampling,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolChoice,
    Usage,
)
from respond.engines.llamacpp import LlamaCppEngine, bundled_model_path
from respond.engines.llamacpp._grammar import output_grammar

PROMPTS = [
    "List eight fruits with a short description of each, as JSON.",
    "Give eight facts about the ocean, as JSON.",
    "Name eight cities and what they are known for, as JSON.",
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 24},
                    "note": {"type": "string", "maxLength": 60},
                },
                "required": ["name", "note"],
                "additionalProperties": False,
            },
            "minItems": 8,
            "maxItems": 8,
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


def turn(prompt: str, tokens: int, schema: dict[str, Any] | None) -> ChatTurn:
    return ChatTurn(
        model="bench",
        messages=[ChatMessage(role="user", content=prompt)],
        json_schema=schema,
        sampling=Sampling(temperature=0.0),
        max_output_tokens=tokens,
    )


async def respond_arm(engine: LlamaCppEngine, chat: ChatTurn) -> tuple[float, int]:
    """(decode seconds, tokens) through respond's engine."""
    first = last = 0.0
    produced = 0
    async for delta in engine.stream(chat):
        now = time.perf_counter()
        if isinstance(delta, TextDelta | ToolCallArgumentsDelta):
            first = first or now
            last = now
        elif isinstance(delta, Usage):
            produced = delta.output_tokens
    return last - first, produced


def stock_arm(
    engine: LlamaCppEngine, llm: Llama, chat: ChatTurn, grammar: str
) -> tuple[float, int]:
    """(decode seconds, tokens) with the grammar inside llama-cpp-python's sampler chain."""
    tokens = engine.tokenize(chat)
    first = last = 0.0
    count = 0
    for token in llm.generate(
        tokens,
        temp=0.0,
        top_k=0,
        min_p=0.0,
        repeat_penalty=1.0,
        grammar=LlamaGrammar.from_string(grammar),
    ):
        now = time.perf_counter()
        first = first or now
        last = now
        count += 1
        if token == llm.token_eos() or count >= (chat.max_output_tokens or 0):
            break
    return last - first, count


def rate(seconds: float, tokens: int) -> float:
    return (tokens - 1) / seconds if seconds > 0 and tokens > 1 else 0.0


ARITHMETIC = """
start: expr
expr: expr ("+" | "-" | "*" | "/") term | term
term: NUMBER | "(" expr ")"
%import common.NUMBER
%import common.WS
%ignore WS
"""
CUSTOM_GRAMMARS = {
    "text": None,
    "lark": InputGrammar("lark", ARITHMETIC),
    "regex": InputGrammar("regex", r"\d{4}-\d{2}-\d{2}"),
}
CUSTOM_PROMPTS = [
    "Call the tool with a long arithmetic expression that adds up the first twenty squares.",
    "Use the tool: write an expression for the total cost of 12 items at 7.5 plus tax.",
    "Call the tool with the date of the first moon landing.",
]
INPUT = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}


def custom_turn(prompt: str, tokens: int, grammar: InputGrammar | None) -> ChatTurn:
    tool = FunctionSpec("calc", "Evaluates its input.", INPUT, grammar=grammar)
    return ChatTurn(
        model="bench",
        messages=[ChatMessage(role="user", content=prompt)],
        tools=[tool],
        tool_choice=ToolChoice(mode="required"),
        parallel_tool_calls=False,
        sampling=Sampling(temperature=0.0),
        max_output_tokens=tokens,
    )


async def custom_main(engine: LlamaCppEngine, rounds: int, tokens: int) -> None:
    rates: dict[str, list[float]] = {arm: [] for arm in CUSTOM_GRAMMARS}
    counts: dict[str, list[int]] = {arm: [] for arm in CUSTOM_GRAMMARS}
    prepared: dict[str, list[float]] = {arm: [] for arm in CUSTOM_GRAMMARS}
    for _ in range(rounds):
        for prompt in CUSTOM_PROMPTS:
            for arm, grammar in CUSTOM_GRAMMARS.items():
                chat = custom_turn(prompt, tokens, grammar)
                start = time.perf_counter()
                await engine.prepare(chat)
                prepared[arm].append((time.perf_counter() - start) * 1000)
                seconds, produced = await respond_arm(engine, chat)
                rates[arm].append(rate(seconds, produced))
                counts[arm].append(produced)
    text = statistics.median(rates["text"])
    print(f"{'arm':<8} {'median tok/s':>13} {'tokens/run':>11} {'vs text':>8} {'prepare ms':>11}")
    for arm, values in rates.items():
        median = statistics.median(values)
        tokens = statistics.median(counts[arm])
        ms = statistics.median(prepared[arm])
        print(f"{arm:<8} {median:>13.1f} {tokens:>11.0f} {median / text:>7.2f}x {ms:>11.1f}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--custom", action="store_true", help="custom tools' grammars")
    args = parser.parse_args()
    engine = LlamaCppEngine(bundled_model_path(), alias="bench", n_threads=args.threads)
    engine.load()
    if args.custom:
        await custom_main(engine, args.rounds, args.tokens)
        return
    llm = Llama(model_path=str(bundled_model_path()), n_threads=args.threads, verbose=False)
    grammar = output_grammar(json_output=True, schema=SCHEMA)
    rates: dict[str, list[float]] = {"free": [], "schema": [], "stock": []}
    counts: dict[str, list[int]] = {"free": [], "schema": [], "stock": []}
    for _ in range(args.rounds):
        for prompt in PROMPTS:
            for arm in rates:
                schema = None if arm == "free" else SCHEMA
                chat = turn(prompt, args.tokens, schema)
                if arm == "stock":
                    seconds, produced = stock_arm(engine, llm, chat, grammar)
                else:
                    seconds, produced = await respond_arm(engine, chat)
                rates[arm].append(rate(seconds, produced))
                counts[arm].append(produced)
    free = statistics.median(rates["free"])
    print(f"{'arm':<8} {'median tok/s':>13} {'tokens/run':>11} {'vs free':>8}")
    for arm, values in rates.items():
        median = statistics.median(values)
        tokens = statistics.median(counts[arm])
        print(f"{arm:<8} {median:>13.1f} {tokens:>11.0f} {median / free:>7.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
