"""respond streaming over HTTP vs llama-cpp-python called directly, side by side in one run.

Same model, same prompts (rendered by the same chat template), greedy decoding so both
produce the same tokens, same thread count. Rounds alternate A/B so drift hits both.
Prints decode tokens/s and time to first token for each, and the ratio respond/direct.

    .venv/bin/python bench/bench_engine_overhead.py [--rounds 5] [--tokens 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_cpp import Llama

from respond.engines import ChatMessage, ChatTurn
from respond.engines.llamacpp import LlamaCppEngine, bundled_model_path
from tests.support.server import start_server

PROMPTS = [
    "Write a long story about a lighthouse keeper and a storm.",
    "Explain in detail how bread is made, step by step.",
    "Describe a journey across a desert, with many details.",
]


def direct(
    engine: LlamaCppEngine, llm: Llama, prompt: str, tokens: int
) -> tuple[float, float, int]:
    """(ttft seconds, decode tokens/s, tokens) for llama-cpp-python's generate loop."""
    turn = ChatTurn(model="x", messages=[ChatMessage(role="user", content=prompt)])
    prompt_tokens = engine.tokenize(turn)
    started = time.perf_counter()
    first = last = started
    count = 0
    for token in llm.generate(prompt_tokens, temp=0.0, top_k=0, min_p=0.0, repeat_penalty=1.0):
        now = time.perf_counter()
        if count == 0:
            first = now
        last = now
        count += 1
        llm.detokenize([token])
        if token == llm.token_eos() or count >= tokens:
            break
    return first - started, (count - 1) / (last - first), count


def over_http(url: str, prompt: str, tokens: int) -> tuple[float, float, int]:
    body = {"input": prompt, "stream": True, "temperature": 0, "max_output_tokens": tokens}
    started = time.perf_counter()
    first = last = started
    deltas = 0
    usage = 0
    with httpx.stream("POST", f"{url}/v1/responses", json=body, timeout=300) as reply:
        for line in reply.iter_lines():
            if line.startswith("event: response.output_text.delta"):
                now = time.perf_counter()
                if deltas == 0:
                    first = now
                last = now
                deltas += 1
            elif line.startswith("data: ") and '"usage":{' in line:
                usage = json.loads(line[6:])["response"]["usage"]["output_tokens"]
    return first - started, (deltas - 1) / (last - first), usage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    engine = LlamaCppEngine(bundled_model_path(), alias="direct", n_threads=args.threads)
    engine.load()  # for its tokenizer
    llm = Llama(model_path=str(bundled_model_path()), n_threads=args.threads, verbose=False)
    tmp = Path("/tmp/respond-bench")
    server = start_server(tmp, "--threads", str(args.threads), "--log-level", "warning")
    results: dict[str, list[tuple[float, float, int]]] = {"direct": [], "respond": []}
    try:
        for _ in range(args.rounds):
            for prompt in PROMPTS:
                results["direct"].append(direct(engine, llm, prompt, args.tokens))
                results["respond"].append(over_http(server.url, prompt, args.tokens))
    finally:
        server.stop()

    def summary(name: str) -> tuple[float, float]:
        ttft = statistics.median(r[0] for r in results[name]) * 1000
        tps = statistics.median(r[1] for r in results[name])
        toks = statistics.mean(r[2] for r in results[name])
        print(f"{name:8s} decode {tps:7.1f} tok/s   TTFT {ttft:6.1f} ms   ({toks:.0f} tokens/run)")
        return tps, ttft

    print(
        f"bundled SmolLM2-135M Q4_1, {args.threads} threads, greedy, "
        f"{args.rounds} rounds x {len(PROMPTS)} prompts"
    )
    d_tps, d_ttft = summary("direct")
    r_tps, r_ttft = summary("respond")
    print(f"ratio respond/direct: decode tok/s {r_tps / d_tps:.3f}   TTFT {r_ttft / d_ttft:.2f}x")


if __name__ == "__main__":
    main()
