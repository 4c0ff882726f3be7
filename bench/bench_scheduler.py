"""Short requests while a long prompt is read: respond's scheduler against llama-server's (#37).

Both serve the bundled SmolLM2 with the same threads, slots and context per slot. For each
server, interleaved round by round: the time to first token of a short request alone, then of
three short requests sent 0.5 s after a long prompt (several thousand tokens, every round a
different one so no cache holds it) while that prompt is still being read, and the time the
long prompt took. Streams Chat
Completions at temperature 0. Printed: the TTFTs (median), the slowdown beside the long prompt
(TTFT beside it / TTFT alone) of each server, and respond's TTFT beside it over llama-server's.

    .venv/bin/python bench/bench_scheduler.py [--rounds 3] [--long-words 1050] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_concurrency import find_llama_server
from respond.engines.llamacpp import bundled_model_path
from tests.support import processes
from tests.support.server import Server, free_port, start_server, wait_ok

CTX = 8192  # per slot: SmolLM2's training window, where llama-server caps a slot
SLOTS = 4
TIMEOUT = 900


def _body(text: str, tokens: int) -> dict[str, object]:
    return {
        "model": "smollm2-135m",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
    }


def ttft(url: str, text: str, tokens: int) -> float:
    """Seconds from sending to the first content delta of a streamed chat completion."""
    body = _body(text, tokens)
    started = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=TIMEOUT) as s:
        for line in s.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                return time.perf_counter() - started
    raise RuntimeError(f"{url}: no content streamed")


def read_through(url: str, text: str) -> None:
    """Send a prompt and read its stream to the end (what it says does not matter)."""
    body = _body(text, 4)
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=TIMEOUT) as s:
        if s.status_code != 200:
            raise RuntimeError(f"{url}: the long prompt got {s.status_code}: {s.read()!r}")
        for _ in s.iter_lines():
            pass


def long_prompt(words: int, round_: int) -> str:
    """A prompt no cache holds: each round's words differ from its first one on."""
    return f"Round {round_}. " + " ".join(f"w{round_}x{n}" for n in range(words)) + " Summarize."


def beside_long(url: str, words: int, round_: int) -> tuple[list[float], float]:
    """TTFTs of three short requests sent while a long prompt is being read, and the seconds
    the long prompt took (what reading it in smaller steps costs it)."""
    took: list[float] = []

    def read_long() -> None:
        started = time.perf_counter()
        read_through(url, long_prompt(words, round_))
        took.append(time.perf_counter() - started)

    reader = threading.Thread(target=read_long)
    reader.start()
    time.sleep(0.5)  # the long prompt is in its first chunks now
    found: list[float] = []
    shorts = [
        threading.Thread(target=lambda n=n: found.append(ttft(url, f"Say hi {n}.", 4)))
        for n in range(3)
    ]
    for short in shorts:
        short.start()
    for short in shorts:
        short.join()
    reader.join()
    return found, took[0]


def start_llama_server(binary: Path, threads: int, tmp: Path) -> Server:
    port = free_port()
    log_path = tmp / "llama-server.log"
    command = [
        str(binary),
        *("-m", str(bundled_model_path()), "--host", "127.0.0.1", "--port", str(port)),
        *("-t", str(threads), "-np", str(SLOTS), "-c", str(CTX * SLOTS), "--jinja"),
        "--log-disable",
    ]
    with log_path.open("wb") as log:
        process = processes.spawn(command, log=log)
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health", 120)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--long-words", type=int, default=1050, help="~7 tokens each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llama-server", type=Path, default=None)
    args = parser.parse_args()
    binary = args.llama_server or find_llama_server()
    if binary is None:
        raise SystemExit("no llama-server: `make llama-server` builds it, or pass --llama-server")
    tmp = Path(tempfile.mkdtemp(prefix="respond-bench-scheduler-"))
    respond = start_server(
        tmp / "respond",
        *("--threads", str(args.threads), "--parallel", str(SLOTS), "-c", str(CTX)),
        *("--cache-ram", "0", "--log-level", "warning", "--embedding-model", "none"),
    )
    llama = start_llama_server(binary, args.threads, tmp)
    servers = {"respond": respond.url, "llama-server": llama.url}
    alone: dict[str, list[float]] = {name: [] for name in servers}
    beside: dict[str, list[float]] = {name: [] for name in servers}
    long: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for url in servers.values():
            ttft(url, "Warm up.", 2)
        for round_ in range(args.rounds):
            for name, url in servers.items():
                alone[name].append(ttft(url, f"Say hi {round_}.", 4))
                shorts, seconds = beside_long(url, args.long_words, round_ * 10 + len(name))
                beside[name] += shorts
                long[name].append(seconds)
    finally:
        respond.stop()
        llama.stop()
    print(
        f"bundled SmolLM2-135M Q4_1, {args.threads} threads, {SLOTS} slots of {CTX} tokens, "
        f"a long prompt of {args.long_words} words, {args.rounds} rounds interleaved"
    )
    table = {}
    for name in servers:
        a, b = statistics.median(alone[name]), statistics.median(beside[name])
        table[name] = b
        print(
            f"{name:<13} short TTFT alone {a * 1000:7.0f} ms, beside the long prompt "
            f"{b * 1000:7.0f} ms (median of {len(beside[name])}): {b / a:.1f}x slower; "
            f"the long prompt {statistics.median(long[name]):.1f} s"
        )
    ratio = table["respond"] / table["llama-server"]
    print(f"ratio respond/llama-server, short TTFT beside the long prompt: {ratio:.2f}x")


if __name__ == "__main__":
    main()
