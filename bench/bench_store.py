"""Stateful Responses: store write cost per response, and chained-turn time to first token.

1. Store write overhead: the same recorded response (input items, output, the full event
   list of a 64-token streamed answer) saved to SQLite and to PostgreSQL, rounds
   alternating between the two, median milliseconds per save and their ratio.
2. Chained-turn TTFT: a chain of 10 turns with previous_response_id against one server;
   time to first token of turn 1 vs turn 10, with input and cached tokens (the embedded
   engine's KV cache should make a chained turn cost only its new tokens).

    .venv/bin/python bench/bench_store.py [--saves 200] [--chains 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from respond._ids import new_id
from respond.store.base import Store
from respond.store.postgres import PostgresStore
from respond.store.sqlite import SQLiteStore
from tests.support.server import start_server
from tests.support.stores import drop_schema, new_schema_url

TTL = 3600


def recorded(tokens: int = 64) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A response as the recorder sees it: the response, its input items, its events."""
    rid, mid = new_id("resp"), new_id("msg")
    text = "word " * tokens
    response = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": "smollm2-135m",
        "output": [
            {
                "type": "message",
                "id": mid,
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                ],
            }
        ],
    }
    inputs = [
        {
            "type": "message",
            "id": new_id("msg"),
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": "Tell me a story. " * 8}],
        }
    ]
    delta = {"type": "response.output_text.delta", "item_id": mid, "output_index": 0}
    events = [{"type": "response.created", "sequence_number": 0, "response": response}]
    events += [
        {**delta, "content_index": 0, "delta": "word ", "logprobs": [], "sequence_number": i + 1}
        for i in range(tokens)
    ]
    events.append(
        {"type": "response.completed", "sequence_number": tokens + 1, "response": response}
    )
    return response, inputs, events


async def save_once(store: Store) -> float:
    response, inputs, events = recorded()
    started = time.perf_counter()
    await store.save_response(None, response, inputs, events)
    return time.perf_counter() - started


async def store_overhead(saves: int) -> None:
    url, schema = new_schema_url()
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Store] = {
            "sqlite": SQLiteStore(Path(tmp) / "bench.sqlite3", ttl_seconds=TTL),
            "postgresql": PostgresStore(url, ttl_seconds=TTL),
        }
        for store in stores.values():
            await store.open()
        try:
            times: dict[str, list[float]] = {name: [] for name in stores}
            for _ in range(saves):  # alternate so drift hits both alike
                for name, store in stores.items():
                    times[name].append(await save_once(store))
        finally:
            for store in stores.values():
                await store.close()
            await drop_schema(schema)
    sqlite_ms = statistics.median(times["sqlite"]) * 1000
    pg_ms = statistics.median(times["postgresql"]) * 1000
    size = len(json.dumps(recorded()[2]))
    print(
        f"store write per response ({saves} saves each, 66 events, {size / 1024:.0f} KiB of events)"
    )
    print(f"  sqlite      median {sqlite_ms:6.2f} ms   p90 {_p90(times['sqlite']):6.2f} ms")
    print(f"  postgresql  median {pg_ms:6.2f} ms   p90 {_p90(times['postgresql']):6.2f} ms")
    print(f"  postgresql / sqlite: {pg_ms / sqlite_ms:.2f}x")


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9)] * 1000


def turn(base: str, text: str, previous: str | None) -> tuple[float, dict[str, Any]]:
    body: dict[str, Any] = {
        "input": text,
        "stream": True,
        "temperature": 0,
        "max_output_tokens": 16,
    }
    if previous:
        body["previous_response_id"] = previous
    started = time.perf_counter()
    first: float | None = None
    final: dict[str, Any] = {}
    with httpx.stream("POST", f"{base}/responses", json=body, timeout=300) as reply:
        for line in reply.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if first is None and event["type"] == "response.output_text.delta":
                first = time.perf_counter()
            if event["type"] in ("response.completed", "response.incomplete"):
                final = event["response"]
    assert first is not None and final, "no text or no terminal event"
    return first - started, final


def chained_ttft(chains: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), "--threads", "2")
        try:
            ttft: dict[int, list[float]] = {1: [], 10: []}
            usage: dict[int, dict[str, Any]] = {}
            for chain in range(chains):
                previous = None
                for number in range(1, 11):
                    text = f"Chain {chain}, turn {number}: tell me one more fact about the sea."
                    seconds, final = turn(server.base_url, text, previous)
                    previous = final["id"]
                    if number in ttft:
                        ttft[number].append(seconds)
                        usage[number] = final["usage"]
        finally:
            server.stop()
    t1, t10 = statistics.median(ttft[1]) * 1000, statistics.median(ttft[10]) * 1000
    print(f"chained-turn TTFT ({chains} chains of 10 turns, SQLite store, 2 threads)")
    for number, ms in ((1, t1), (10, t10)):
        u = usage[number]
        cached = u["input_tokens_details"]["cached_tokens"]
        print(
            f"  turn {number:2d}: median TTFT {ms:7.1f} ms, input {u['input_tokens']} tokens, "
            f"cached {cached}"
        )
    print(f"  turn 10 / turn 1: {t10 / t1:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--chains", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(store_overhead(args.saves))
    chained_ttft(args.chains)


if __name__ == "__main__":
    main()
