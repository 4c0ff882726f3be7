"""What the embedded engine promises: real usage, KV reuse, logprobs, disconnects, fairness."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from tests.support.server import Server

STORY = "Write a very long story about a dragon who learns to sing."


def post(server: Server, body: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=timeout)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def generation_lines(server: Server, since: int) -> list[tuple[str, str]]:
    return re.findall(r"generation (\w+) after (\d+) tokens", server.log()[since:])


def wait_for_generation_end(server: Server, since: int) -> tuple[str, int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = generation_lines(server, since)
        if lines:
            how, count = lines[-1]
            return how, int(count)
        time.sleep(0.05)
    raise AssertionError("the engine never reported the end of generation")


def test_cached_tokens_report_kv_reuse(server: Server) -> None:
    body = {
        "instructions": "You are terse. " * 20,
        "input": "Name a fruit.",
        "max_output_tokens": 4,
    }
    post(server, body)
    second = post(server, body)
    details = second["usage"]["input_tokens_details"]
    # The same long prefix was just evaluated: all but the last prompt token are reused.
    assert details["cached_tokens"] >= second["usage"]["input_tokens"] - 8


def test_logprobs_with_top_alternatives(server: Server) -> None:
    body = {
        "input": "Say yes.",
        "max_output_tokens": 4,
        "temperature": 0,
        "include": ["message.output_text.logprobs"],
        "top_logprobs": 3,
    }
    response = post(server, body)
    part = response["output"][0]["content"][0]
    # A completed turn also generated its end-of-turn token, which has no text.
    ended = response["status"] == "completed"
    assert len(part["logprobs"]) == response["usage"]["output_tokens"] - ended
    assert "".join(lp["token"] for lp in part["logprobs"]) == part["text"]
    for lp in part["logprobs"]:
        assert lp["logprob"] <= 0
        assert len(lp["top_logprobs"]) == 3
        assert lp["top_logprobs"][0]["logprob"] >= lp["logprob"] - 1e-6
        # A token may hold part of a multi-byte character; its text shows that as U+FFFD.
        assert bytes(lp["bytes"]).decode(errors="replace") == lp["token"]
    assert response["top_logprobs"] == 3


def test_every_token_of_a_character_split_over_tokens_has_its_logprob(server: Server) -> None:
    body = {
        "input": "Repeat exactly: \N{DRAGON}\N{DRAGON}\N{DRAGON} \N{SPARKLES}\N{SPARKLES}",
        "max_output_tokens": 24,
        "temperature": 0,
        "include": ["message.output_text.logprobs"],
    }
    response = post(server, body)
    part = response["output"][0]["content"][0]
    assert "\N{DRAGON}" in part["text"]  # each emoji is several byte tokens for this model
    ended = response["status"] == "completed"
    assert len(part["logprobs"]) == response["usage"]["output_tokens"] - ended
    raw = b"".join(bytes(lp["bytes"]) for lp in part["logprobs"])
    assert raw.decode("utf-8") == part["text"]
    assert any("\N{REPLACEMENT CHARACTER}" in lp["token"] for lp in part["logprobs"])


def test_sampling_params_are_echoed(server: Server) -> None:
    body = {
        "input": "x",
        "max_output_tokens": 2,
        "temperature": 0.3,
        "top_p": 0.9,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "safety_identifier": "user-1",
        "prompt_cache_key": "k1",
        "service_tier": "auto",
        "user": "u",
        "parallel_tool_calls": False,
    }
    response = post(server, body)
    for key, value in body.items():
        if key not in ("input",):
            assert response[key] == value, key


def test_stream_disconnect_stops_generation(server: Server) -> None:
    since = len(server.log())
    body = {"input": STORY, "stream": True, "max_output_tokens": 3000}
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=60) as reply:
        deltas = 0
        for line in reply.iter_lines():
            deltas += line.startswith("event: response.output_text.delta")
            if deltas == 3:
                break
    how, count = wait_for_generation_end(server, since)
    assert how == "cancelled"
    assert count < 40


def test_non_stream_disconnect_stops_generation(server: Server) -> None:
    since = len(server.log())
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{server.base_url}/responses",
            json={"input": STORY, "max_output_tokens": 3000},
            timeout=0.5,
        )
    how, _ = wait_for_generation_end(server, since)
    assert how == "cancelled"


def test_concurrent_requests_take_turns_and_health_stays_up(
    server: Server, client: openai.OpenAI
) -> None:
    results: list[str | None] = []

    def ask(n: int) -> None:
        r = client.responses.create(model="smollm2-135m", input=f"Say {n}.", max_output_tokens=24)
        results.append(r.status)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    # While the model is busy, /health still answers (generation is off the event loop).
    health = httpx.get(f"{server.url}/health", timeout=10).status_code
    busy_meanwhile = any(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join(timeout=120)
    assert health == 200
    assert busy_meanwhile
    assert len(results) == 4
    assert set(results) <= {"completed", "incomplete"}
