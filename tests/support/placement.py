"""Asking the embedded model where it is placed (tests/e2e/test_placement.py on an RPC device,
tests/gpu on a GPU): short greedy questions, and a conversation worth keeping in the prompt
cache that another one pushes out of its slot."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.server import Server

__all__ = ["MODEL", "TIMEOUT", "about", "ask", "continue_after_another"]

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
