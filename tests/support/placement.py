"""Asking the embedded model where it is placed (tests/e2e/test_placement.py on an RPC device,
tests/gpu on a GPU): short greedy questions, a conversation worth keeping in the prompt cache
that others push out of its slot, and the checks both files make of a placed model."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import scrape, value
from tests.support.server import Server, start_server

__all__ = [
    "MODEL",
    "TIMEOUT",
    "about",
    "answers_and_streams",
    "ask",
    "comes_back_from_the_prompt_cache",
    "continue_after_another",
    "quantized_cells_restored_as_read_afresh",
    "requests_share_the_slots",
]

MODEL = "smollm2-135m"
TIMEOUT = 300  # a loaded two-core machine is slow; never a timed assertion


def about(topic: str) -> str:
    """A question long enough that the conversation's cells are worth saving (_slots.py)."""
    return (
        f"Tell me one short fact about {topic}, something a child could remember about "
        f"{topic}, where {topic} are found, and why people have cared about {topic} so long."
    )


def ask(server: Server, text: str, **extra: Any) -> dict[str, Any]:
    body = {"model": MODEL, "input": text, "max_output_tokens": 12, "temperature": 0, **extra}
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=TIMEOUT)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def continue_after_another(server: Server) -> list[dict[str, Any]]:
    """Turn 2 of a conversation after another one took the only slot: its logprobs."""
    first = ask(server, about("owls"), store=True)
    ask(server, about("rivers"))
    again = ask(
        server,
        "And what do owls eat?",
        previous_response_id=first["id"],
        include=["message.output_text.logprobs"],
    )
    logprobs: list[dict[str, Any]] = again["output"][0]["content"][0]["logprobs"]
    assert logprobs
    return logprobs


def answers_and_streams(server: Server) -> None:
    answer = ask(server, "Name a fruit.")
    assert answer["output"][0]["content"][0]["text"].strip()
    events = []
    body = {"model": MODEL, "input": "Name a color.", "max_output_tokens": 8, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=TIMEOUT) as s:
        for line in s.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:])["type"])
    assert "response.output_text.delta" in events
    assert events[-1] in ("response.completed", "response.incomplete")  # 8 tokens may cut it


def requests_share_the_slots(server: Server, requests: int) -> None:
    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda n=n: answers.append(ask(server, f"Count to {n}.")))
        for n in range(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == requests
    assert all(a["status"] in ("completed", "incomplete") for a in answers)


def comes_back_from_the_prompt_cache(server: Server, others: list[str]) -> None:
    """A conversation, then one on each of `others` topics (more than the free slots): its
    cells leave the device for the host's prompt cache and are restored for its next turn."""
    hits = value(scrape(server.url), "respond_prompt_cache_hits_total", model=MODEL)
    first = ask(server, about("owls"), store=True)
    for topic in others:
        ask(server, about(topic))
    again = ask(server, "And what do owls eat?", previous_response_id=first["id"])
    assert again["usage"]["input_tokens_details"]["cached_tokens"] >= first["usage"]["input_tokens"]
    assert value(scrape(server.url), "respond_prompt_cache_hits_total", model=MODEL) > hits


def quantized_cells_restored_as_read_afresh(tmp: Path, placed: str, *args: str) -> None:
    """-ctk q8_0 -ctv q8_0 -fa on, one slot, and `args`: a conversation whose cells were saved
    to the prompt cache and restored continues with the logprobs of one read afresh. `placed`
    is what the log must say of the placement."""
    kv = ("-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "--parallel", "1", *args)
    cached = start_server(tmp / "cached", *kv, "--cache-ram", "64")
    fresh = start_server(tmp / "fresh", *kv, "--cache-ram", "0")
    try:
        assert placed in cached.log()
        continued = {
            name: continue_after_another(s) for name, s in (("cached", cached), ("fresh", fresh))
        }
        restored = value(scrape(cached.url), "respond_prompt_cache_hits_total", model=MODEL)
    finally:
        cached.stop()
        fresh.stop()
    assert restored >= 1
    ours, theirs = continued["cached"], continued["fresh"]
    assert [t["token"] for t in ours] == [t["token"] for t in theirs]
    for mine, other in zip(ours, theirs, strict=True):
        assert mine["logprob"] == pytest.approx(other["logprob"], abs=0.02)
