"""Agent traffic: many sessions on few slots, respond's embedded engine against llama-server.

Coding agents (Codex with `store: false`, Claude Code, every Chat Completions agent) send one
long system prompt that every session shares and resend the whole history each turn, adding a
tool result of their own. With more sessions than slots, a session's cells are evicted before
it comes back; this measures what its next turn pays for that, on both servers: the same GGUF
(the bundled SmolLM2), the same threads, the same slots and context per slot (llama-server
divides `-c` among its slots, so it gets `-c` times the slots), each with its prompt cache in
host RAM (`--cache-ram` on both).

Every session is a thread: turn 1 is the task, each later turn the previous answer and a
tool result of ~150 tokens of its own, `--turns` turns, answers of `--tokens` tokens at
temperature 0, streamed through Chat Completions. All sessions of a level run at once; the
levels run on one server, then on the other, then on respond again with `store: true` and
previous_response_id chains over /v1/responses (respond sends only the new input; llama-server
has no such API). Each level's sessions are new (their own ids in every message), so only the
system prompt is shared with what ran before.

Reported per server and level: turns/s (all turns / the level's wall time), time to first
token p50/p95 over every turn, and prompt tokens evaluated per turn (prompt tokens less the
cached ones that usage reports), so the saving shows as tokens, not only seconds.

llama-server is not part of respond: build it once (`make llama-server`, docs/benchmarks.md)
or pass --llama-server. The issue's size (minutes on two cores):

    .venv/bin/python bench/bench_agents.py --sessions 4,16,32 --parallel 8 --turns 6

and the smallest one, to see that it runs:

    .venv/bin/python bench/bench_agents.py --sessions 2 --parallel 1 --turns 2 \\
        --system-rules 8 --tokens 8
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_concurrency import find_llama_server  # bench/ is the script's folder: first on sys.path

from respond.engines.llamacpp import bundled_model_path
from tests.support import processes
from tests.support.server import Server, free_port, start_server, wait_ok

MODEL = "smollm2-135m"  # llama-server serves any name
TIMEOUT = 1800


@dataclass
class Turn:
    ttft: float
    prompt: int  # prompt tokens, as usage says
    cached: int  # of those, reused (usage's cached tokens)
    error: str | None = None


@dataclass
class Traffic:
    system: str
    turns: int
    tokens: int


def system_prompt(rules: int) -> str:
    """A long system prompt every session shares (the bundled model: ~36 tokens a rule)."""
    return "You are a coding agent working in a repository.\n" + "\n".join(
        f"Rule {n}: read the files you change, run the tests after each edit, keep commits "
        f"small, and report what you did in plain words (rule {n})."
        for n in range(rules)
    )


def tool_result(session: str, turn: int) -> str:
    """~150 tokens of a tool's output, its own to this session and turn."""
    lines = [f"$ run_tests --session {session} --step {turn}"]
    lines += [
        f"tests/test_module_{session}_{turn}_{n}.py::test_case_{n} PASSED [{n * 12}%]"
        for n in range(4)
    ]
    return "Tool result:\n" + "\n".join(lines) + "\nWhat next?"


def task(session: str) -> str:
    return f"Session {session}: fix the failing test in module {session} and explain the fix."


# ---------------------------------------------------------------- one turn on each API


def chat_turn(url: str, messages: list[dict[str, str]], tokens: int) -> tuple[Turn, str]:
    """One streamed Chat Completions turn: its timing and usage, and the text it wrote."""
    body = {
        "model": MODEL,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": tokens,
    }
    started = time.perf_counter()
    first = 0.0
    text: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=TIMEOUT) as r:
            if r.status_code != 200:
                return Turn(0, 0, 0, f"HTTP {r.status_code}"), ""
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        first = first or time.perf_counter()
                        text.append(piece)
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings  # llama-server's own figures
    except httpx.HTTPError as exc:
        return Turn(0, 0, 0, type(exc).__name__), ""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens", timings.get("cache_n", 0))
    ttft = (first or time.perf_counter()) - started
    return Turn(ttft, usage.get("prompt_tokens", 0), cached or 0), "".join(text)


def responses_turn(url: str, body: dict[str, Any]) -> tuple[Turn, str]:
    """One streamed /v1/responses turn (respond only): timing, usage, the response id."""
    started = time.perf_counter()
    first = 0.0
    final: dict[str, Any] = {}
    try:
        with httpx.stream(
            "POST", f"{url}/v1/responses", json={**body, "stream": True}, timeout=TIMEOUT
        ) as r:
            if r.status_code != 200:
                return Turn(0, 0, 0, f"HTTP {r.status_code}"), ""
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "response.output_text.delta":
                    first = first or time.perf_counter()
                elif event["type"] in ("response.completed", "response.incomplete"):
                    final = event["response"]
    except httpx.HTTPError as exc:
        return Turn(0, 0, 0, type(exc).__name__), ""
    if not final:
        return Turn(0, 0, 0, "no terminal event"), ""
    usage = final["usage"]
    ttft = (first or time.perf_counter()) - started
    turn = Turn(ttft, usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"])
    return turn, final["id"]


# ---------------------------------------------------------------- sessions


def history_session(url: str, session: str, traffic: Traffic) -> list[Turn]:
    """An agent resending its whole history every turn (Chat Completions)."""
    messages = [
        {"role": "system", "content": traffic.system},
        {"role": "user", "content": task(session)},
    ]
    turns: list[Turn] = []
    for k in range(traffic.turns):
        if k:
            messages.append({"role": "user", "content": tool_result(session, k)})
        turn, text = chat_turn(url, messages, traffic.tokens)
        turns.append(turn)
        if turn.error:
            break
        messages.append({"role": "assistant", "content": text})
    return turns


def chained_session(url: str, session: str, traffic: Traffic) -> list[Turn]:
    """An agent chaining stored responses: only the new input each turn (respond)."""
    body: dict[str, Any] = {
        "model": MODEL,
        "instructions": traffic.system,
        "input": task(session),
        "temperature": 0,
        "max_output_tokens": traffic.tokens,
        "store": True,
    }
    turns: list[Turn] = []
    for k in range(traffic.turns):
        turn, response_id = responses_turn(url, body)
        turns.append(turn)
        if turn.error:
            break
        body = {**body, "input": tool_result(session, k + 1), "previous_response_id": response_id}
    return turns


Session = Callable[[str, str, Traffic], list[Turn]]


@dataclass
class Level:
    turns: list[Turn]
    seconds: float

    def summary(self) -> dict[str, float]:
        ok = [t for t in self.turns if t.error is None]
        ttfts = sorted(t.ttft for t in ok) or [0.0]
        return {
            "turns/s": len(ok) / self.seconds if self.seconds else 0.0,
            "p50": statistics.median(ttfts),
            "p95": ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))],
            "evaluated": statistics.mean(t.prompt - t.cached for t in ok) if ok else 0.0,
            "prompt": statistics.mean(t.prompt for t in ok) if ok else 0.0,
            "errors": len(self.turns) - len(ok),
        }


def level(url: str, run: Session, prefix: str, sessions: int, traffic: Traffic) -> Level:
    """`sessions` agents at once; every turn they took and the wall time."""
    results: list[list[Turn]] = [[] for _ in range(sessions)]

    def one(index: int) -> None:
        results[index] = run(url, f"{prefix}{index}", traffic)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(sessions)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Level([t for turns in results for t in turns], time.perf_counter() - started)


# ---------------------------------------------------------------- servers


def start_llama_server(binary: Path, args: argparse.Namespace, tmp: Path) -> Server:
    port = free_port()
    log_path = tmp / "llama-server.log"
    command = [
        str(binary),
        *("-m", str(args.model or bundled_model_path()), "--host", "127.0.0.1"),
        *("--port", str(port), *shlex.split(args.placement)),
        *("-t", str(args.threads), "-np", str(args.parallel)),
        *("-c", str(args.ctx * args.parallel)),  # llama-server divides -c among its slots
        *("--cache-ram", str(args.llama_cache_ram), "--jinja", "--log-disable"),
    ]
    with log_path.open("wb") as log:  # its own process group, as Server.stop expects
        process = processes.spawn(command, log=log)
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health", 120)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default="4,16,32", help="sessions at once, per level")
    parser.add_argument("--parallel", type=int, default=8, help="slots of each server")
    parser.add_argument("--ctx", type=int, default=8192, help="context per slot")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=32, help="answer tokens per turn")
    parser.add_argument("--system-rules", type=int, default=55, help="~36 tokens each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-ram", type=int, default=8192, help="respond's, MiB")
    parser.add_argument("--llama-cache-ram", type=int, default=8192, help="llama-server's, MiB")
    parser.add_argument("--no-chains", action="store_true", help="skip respond's chain arm")
    parser.add_argument("--llama-server", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: SmolLM2)")
    parser.add_argument(
        "--placement", default="", help="flags both servers take, e.g. '-ngl 99 -fa on'"
    )
    args = parser.parse_args()
    binary = args.llama_server or find_llama_server()
    if binary is None:
        raise SystemExit("no llama-server: build it (docs/benchmarks.md) or pass --llama-server")
    levels = [int(n) for n in args.sessions.split(",")]
    traffic = Traffic(system_prompt(args.system_rules), args.turns, args.tokens)

    tmp = Path(tempfile.mkdtemp(prefix="respond-bench-agents-"))
    respond = start_server(
        tmp / "respond",
        *("--threads", str(args.threads), "--parallel", str(args.parallel)),
        *("-c", str(args.ctx), "--cache-ram", str(args.cache_ram), "--log-level", "warning"),
        *(("-m", str(args.model), "--alias", MODEL) if args.model else ()),  # one name for both
        *shlex.split(args.placement),
    )
    llama = start_llama_server(binary, args, tmp)
    arms: list[tuple[str, str, Session]] = [
        ("respond", respond.url, history_session),
        ("llama-server", llama.url, history_session),
    ]
    if not args.no_chains:
        arms.append(("respond chain", respond.url, chained_session))
    table: dict[tuple[str, int], dict[str, float]] = {}
    try:
        for _, url, _ in arms[:2]:  # warm up: first allocations, nothing shared with the levels
            chat_turn(url, [{"role": "user", "content": "Say hi."}], 4)
        for n in levels:
            for name, url, run in arms:
                prefix = f"{name.replace(' ', '-')}-{n}-"
                table[(name, n)] = level(url, run, prefix, n, traffic).summary()
    finally:
        respond.stop()
        llama.stop()

    print(
        f"{args.model or 'bundled SmolLM2-135M Q4_1'} {args.placement}, "
        f"{args.threads} threads, {args.parallel} slots of "
        f"{args.ctx} tokens, {args.turns} turns of {args.tokens} tokens at temperature 0, "
        f"system prompt of {args.system_rules} rules, --cache-ram {args.cache_ram} MiB "
        f"(llama-server {args.llama_cache_ram} MiB)"
    )
    header = f"{'server':<15}{'sessions':>9}{'turns/s':>9}{'TTFT p50':>10}{'TTFT p95':>10}"
    print(header + f"{'prompt/turn':>13}{'evaluated/turn':>16}{'errors':>8}")
    for n in levels:
        for name, _, _ in arms:
            s = table[(name, n)]
            print(
                f"{name:<15}{n:>9}{s['turns/s']:>9.2f}{s['p50']:>9.2f}s{s['p95']:>9.2f}s"
                f"{s['prompt']:>13.0f}{s['evaluated']:>16.0f}{s['errors']:>8.0f}"
            )
    for n in levels:
        ours, theirs = table[("respond", n)], table[("llama-server", n)]
        rate = ours["turns/s"] / theirs["turns/s"] if theirs["turns/s"] else float("nan")
        ttft = ours["p50"] / theirs["p50"] if theirs["p50"] else float("nan")
        print(
            f"ratio respond/llama-server at {n} sessions: turns/s {rate:.2f}x, "
            f"TTFT p50 {ttft:.2f}x, evaluated/turn {ours['evaluated']:.0f} vs "
            f"{theirs['evaluated']:.0f}"
        )


if __name__ == "__main__":
    main()
