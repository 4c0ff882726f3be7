"""Concurrent streams: respond's embedded engine against llama.cpp's llama-server.

Both serve the same GGUF (the bundled SmolLM2) with the same threads and slots; rounds
are interleaved (every concurrency on both servers, then again). Each request streams
Chat Completions at temperature 0 with the same prompt and max_tokens.

- concurrency 1, 4, 8: aggregate output tokens/s, TTFT p50/p95, per-stream decode
  tokens/s (median), errors.
- chains: 4 conversations of 10 turns interleaved (turn k of every chain, then turn
  k + 1), each resending its whole history: turn-10 TTFT / turn-1 TTFT per chain.

llama-server is not part of respond or its tests: build it once for the benchmark (see
docs/benchmarks.md) and pass --llama-server, or let it be found under
~/.cache/respond/llama-server/.

    .venv/bin/python bench/bench_concurrency.py [--rounds 2] [--tokens 96] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from respond.engines.llamacpp import bundled_model_path
from tests.support import processes
from tests.support.server import Server, free_port, start_server, wait_ok

PROMPTS = [
    "Write a very long story about a dragon who learns to sing.",
    "Write a long story about a lighthouse keeper and a storm.",
    "Explain in detail how bread is made, step by step.",
    "Describe a journey across a desert, with many details.",
]
CTX_PER_SLOT = 4096
TIMEOUT = 900


@dataclass
class Result:
    ttft: float  # seconds to the first content token
    decode: float  # tokens/s after the first
    tokens: int
    started: float
    ended: float
    error: str | None = None


def stream_chat(url: str, messages: list[dict[str, str]], tokens: int) -> tuple[Result, str]:
    """One streamed chat completion: its timings, and the text it wrote."""
    body = {
        "model": "smollm2-135m",  # llama-server serves any name
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": tokens,
    }
    started = time.perf_counter()
    first = last = 0.0
    produced = 0
    text: list[str] = []
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=TIMEOUT) as r:
            if r.status_code != 200:
                return Result(0, 0, 0, started, time.perf_counter(), f"HTTP {r.status_code}"), ""
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        last = time.perf_counter()
                        first = first or last
                        text.append(piece)
                if chunk.get("usage"):
                    produced = chunk["usage"]["completion_tokens"]
    except httpx.HTTPError as exc:
        return Result(0, 0, 0, started, time.perf_counter(), type(exc).__name__), ""
    ended = time.perf_counter()
    decode = (produced - 1) / (last - first) if last > first and produced > 1 else 0.0
    return Result(first - started, decode, produced, started, ended), "".join(text)


def concurrent(url: str, n: int, tokens: int) -> list[Result]:
    results: list[Result] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        messages = [{"role": "user", "content": PROMPTS[index % len(PROMPTS)]}]
        result, _ = stream_chat(url, messages, tokens)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def chains(url: str, n_chains: int, turns: int, tokens: int) -> list[tuple[float, float]]:
    """(turn-1 TTFT, turn-last TTFT) for each chain."""
    histories: list[list[dict[str, str]]] = [[] for _ in range(n_chains)]
    ttfts: list[list[float]] = [[] for _ in range(n_chains)]
    for turn in range(turns):
        for chain, history in enumerate(histories):
            history.append(
                {"role": "user", "content": f"Chain {chain}, turn {turn}: {PROMPTS[chain % 4]}"}
            )
            result, text = stream_chat(url, history, tokens)
            history.append({"role": "assistant", "content": text})
            ttfts[chain].append(result.ttft)
    return [(t[0], t[-1]) for t in ttfts]


def start_llama_server(binary: Path, args: argparse.Namespace, tmp: Path) -> Server:
    port = free_port()
    log_path = tmp / "llama-server.log"
    command = [
        str(binary),
        "-m",
        str(args.model or bundled_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-t",
        str(args.threads),
        "-np",
        str(args.parallel),
        "-c",
        str(CTX_PER_SLOT * args.parallel),  # llama-server divides -c among its slots
        "--jinja",
        "--log-disable",
        *shlex.split(args.placement),
    ]
    with log_path.open("wb") as log:
        process = processes.spawn(command, log=log)  # its own group, as Server.stop expects
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health", 120)
    return server


def find_llama_server() -> Path | None:
    found = sorted(Path.home().glob(".cache/respond/llama-server/*/**/llama-server"))
    return next((path for path in found if path.is_file()), None)


def aggregate(run: list[Result]) -> float:
    """Output tokens/s of one run of concurrent streams, from the first start to the last end."""
    ok = [r for r in run if r.error is None]
    if not ok:
        return 0.0
    return sum(r.tokens for r in ok) / (max(r.ended for r in ok) - min(r.started for r in ok))


def summary(runs: list[list[Result]]) -> dict[str, float]:
    results = [r for run in runs for r in run]
    ok = [r for r in results if r.error is None]
    if not ok:
        return {"agg": 0, "p50": 0, "p95": 0, "decode": 0, "errors": len(results)}
    ttfts = sorted(r.ttft for r in ok)
    return {
        "agg": statistics.median(aggregate(run) for run in runs),
        "p50": statistics.median(ttfts),
        "p95": ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))],
        "decode": statistics.median(r.decode for r in ok),
        "errors": len(results) - len(ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--chain-tokens", type=int, default=32)
    parser.add_argument("--llama-server", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: SmolLM2)")
    parser.add_argument(
        "--placement", default="", help="flags both servers take, e.g. '-ngl 99 -fa on'"
    )
    args = parser.parse_args()
    binary = args.llama_server or find_llama_server()
    if binary is None:
        raise SystemExit("no llama-server: build it (docs/benchmarks.md) or pass --llama-server")
    levels = [int(c) for c in args.concurrency.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="respond-bench-"))
    respond = start_server(
        tmp / "respond",
        *("--threads", str(args.threads), "--parallel", str(args.parallel)),
        *("-c", str(CTX_PER_SLOT), "--log-level", "warning"),
        *(("-m", str(args.model), "--alias", "smollm2-135m") if args.model else ()),
        *shlex.split(args.placement),
    )
    upstream = start_llama_server(binary, args, tmp)
    servers = {"respond": respond.url, "llama-server": upstream.url}
    runs: dict[tuple[str, int], list[list[Result]]] = defaultdict(list)
    ttfts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    try:
        for url in servers.values():  # warm up: load pages, first allocations
            concurrent(url, 1, 8)
        for _ in range(args.rounds):
            for level in levels:
                for name, url in servers.items():
                    runs[(name, level)].append(concurrent(url, level, args.tokens))
        for name, url in servers.items():
            ttfts[name] = chains(url, args.chains, args.turns, args.chain_tokens)
    finally:
        respond.stop()
        upstream.stop()

    print(
        f"{args.model or 'bundled SmolLM2-135M Q4_1'} {args.placement}, "
        f"{args.threads} threads, {args.parallel} slots, "
        f"{args.tokens} tokens at temperature 0, {args.rounds} rounds interleaved"
    )
    header = f"{'server':<13}{'streams':>8}{'agg tok/s':>11}{'TTFT p50':>10}{'TTFT p95':>10}"
    print(header + f"{'decode tok/s':>14}{'errors':>8}")
    table: dict[tuple[str, int], dict[str, float]] = {}
    for level in levels:
        for name in servers:
            s = table[(name, level)] = summary(runs[(name, level)])
            print(
                f"{name:<13}{level:>8}{s['agg']:>11.1f}{s['p50']:>9.2f}s{s['p95']:>9.2f}s"
                f"{s['decode']:>14.1f}{s['errors']:>8.0f}"
            )
    for level in levels:
        ours, theirs = table[("respond", level)], table[("llama-server", level)]
        agg = ours["agg"] / theirs["agg"] if theirs["agg"] else float("nan")
        decode = ours["decode"] / theirs["decode"] if theirs["decode"] else float("nan")
        ttft = ours["p50"] / theirs["p50"] if theirs["p50"] else float("nan")
        print(
            f"ratio respond/llama-server at {level}: aggregate {agg:.2f}, "
            f"decode {decode:.2f}, TTFT p50 {ttft:.2f}x"
        )
    for name, pairs in ttfts.items():
        shown = ", ".join(f"{last / first:.2f}" if first > 0 else "inf" for first, last in pairs)
        ms = ", ".join(f"{first * 1000:.0f}->{last * 1000:.0f}" for first, last in pairs)
        print(f"{name:<13} chains turn-{args.turns}/turn-1 TTFT: {shown} (ms: {ms})")


if __name__ == "__main__":
    main()
