"""Many requests at once on the embedded engine: slots, continuous batching, the prompt
cache per conversation, cancels that touch one stream only, and the queue limit (429)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond.engines.llamacpp._slots import copy_worth
from respond.protocol.events import TERMINAL_TYPES
from tests.support.server import Server, start_server
from tests.support.sse import read_events

MODEL = "smollm2-135m"
# At temperature 0 the bundled model tells this story until the token limit.
STORY = "Write a very long story about a dragon who learns to sing."
TIMEOUT = 600  # a loaded two-core machine is slow; never a timed assertion


@pytest.fixture(scope="module")
def slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(Path(tmp_path_factory.mktemp("slots")), "--threads", "2", "--parallel", "4")
    yield srv
    srv.stop()


class Stream:
    """One streamed response, read in a thread: its events and when each arrived."""

    def __init__(self, server: Server, body: dict[str, Any], *, stop_after: int | None = None):
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.status = 0
        self.hang_up = threading.Event()
        self._args = (server, {**body, "stream": True}, stop_after)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        server, body, stop_after = self._args
        url = f"{server.base_url}/responses"
        with httpx.stream("POST", url, json=body, timeout=TIMEOUT) as reply:
            self.status = reply.status_code
            for event in read_events(reply):
                self.events.append(event)
                self.times.append(time.monotonic())
                if stop_after is not None and len(self.deltas) >= stop_after:
                    self.hang_up.set()
                if self.hang_up.is_set():
                    return  # mid-stream

    def join(self) -> Stream:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the stream never ended"
        return self

    @property
    def deltas(self) -> list[float]:
        return [t for e, t in zip(self.events, self.times, strict=True) if _is_delta(e)]

    @property
    def terminal(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] in TERMINAL_TYPES]

    @property
    def response(self) -> dict[str, Any]:
        (last,) = self.terminal
        assert self.events[-1] is last, "the terminal event is not the last"
        response: dict[str, Any] = last["response"]
        return response


def _is_delta(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "response.output_text.delta")


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def count_tokens(server: Server, body: dict[str, Any]) -> int:
    reply = httpx.post(f"{server.base_url}/responses/input_tokens", json=body, timeout=TIMEOUT)
    assert reply.status_code == 200, reply.text
    tokens: int = reply.json()["input_tokens"]
    return tokens


def test_eight_concurrent_streams_each_end_once_with_their_usage(slots: Server) -> None:
    bodies = [
        {
            "input": f"Tell me fact number {n} about the sea.",
            "max_output_tokens": 24,
            "include": ["message.output_text.logprobs"],
        }
        for n in range(8)
    ]
    streams = [Stream(slots, body) for body in bodies]  # 4 slots: 4 of them wait their turn
    for stream, body in zip(streams, bodies, strict=True):
        stream.join()
        assert stream.status == 200
        assert len(stream.terminal) == 1
        response = stream.response
        assert response["status"] in ("completed", "incomplete")
        usage = response["usage"]
        assert usage["input_tokens"] == count_tokens(slots, body)
        assert 0 < usage["output_tokens"] <= 24
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        # One logprob per generated token (a completed turn also generated its end token):
        # each slot's tokens are its own, whatever the others decode in the same batch.
        part = response["output"][0]["content"][0]
        ended = response["status"] == "completed"
        assert len(part["logprobs"]) == usage["output_tokens"] - ended
        # A character split over two tokens shows as U+FFFD in each token's string (as in
        # OpenAI's logprobs); its bytes are exact, and together they are the text.
        raw = b"".join(bytes(lp["bytes"]) for lp in part["logprobs"])
        assert raw.decode("utf-8", errors="replace") == part["text"]


def test_a_request_arriving_mid_generation_starts_before_it_ends(slots: Server) -> None:
    long = Stream(slots, {"input": STORY, "max_output_tokens": 300, "temperature": 0})
    wait_until(lambda: len(long.deltas) >= 5, "the long stream started")
    late = Stream(slots, {"input": "Say hi.", "max_output_tokens": 8}).join()
    long.join()
    assert late.deltas, "the late request produced no text"
    assert long.response["usage"]["output_tokens"] == 300
    assert late.deltas[0] < long.deltas[-1], "the late request waited for the long one"
    assert len(late.terminal) == len(long.terminal) == 1


def test_interleaved_chains_each_reuse_their_previous_turn(slots: Server) -> None:
    topics = ["apples", "rivers", "castles"]
    previous: dict[str, dict[str, Any]] = {}

    def turn(topic: str, k: int, out: dict[str, dict[str, Any]]) -> None:
        body: dict[str, Any] = {
            "input": f"Tell me one more thing about {topic} (part {k}).",
            "max_output_tokens": 16,
        }
        if topic in previous:
            body["previous_response_id"] = previous[topic]["id"]
        reply = httpx.post(f"{slots.base_url}/responses", json=body, timeout=TIMEOUT)
        assert reply.status_code == 200, reply.text
        out[topic] = reply.json()

    for k in range(1, 4):  # turn k of every chain at once, then turn k + 1
        results: dict[str, dict[str, Any]] = {}
        threads = [threading.Thread(target=turn, args=(t, k, results)) for t in topics]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        assert set(results) == set(topics)
        for topic in topics:
            usage = results[topic]["usage"]
            cached = usage["input_tokens_details"]["cached_tokens"]
            assert cached < usage["input_tokens"]  # the last prompt token is always evaluated
            if k > 1:
                # The whole previous prompt is the start of this one, and its slot kept it.
                assert cached >= previous[topic]["usage"]["input_tokens"], (topic, k)
        previous = results


def test_a_system_prompt_shared_by_running_conversations_is_evaluated_once(
    slots: Server,
) -> None:
    system = " ".join(f"Rule {n}: answer briefly and politely, in plain words." for n in range(20))
    long = {"instructions": system, "input": STORY, "max_output_tokens": 200, "temperature": 0}
    first = Stream(slots, long)
    wait_until(lambda: len(first.deltas) >= 3, "the first conversation is generating")
    body = {"instructions": system, "input": "Name a colour.", "max_output_tokens": 8}
    reply = httpx.post(f"{slots.base_url}/responses", json=body, timeout=TIMEOUT)
    assert reply.status_code == 200, reply.text
    # Its slot was busy, so the second one ran in another, with a copy of its cells.
    shared = count_tokens(slots, body) - count_tokens(slots, {"input": "Name a colour."})
    assert shared > 100
    usage = reply.json()["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] >= shared
    first.join()  # the copy left it whole: it went on to its own end
    assert len(first.terminal) == 1
    assert first.response["status"] in ("completed", "incomplete")
    assert 3 < len(first.deltas) <= first.response["usage"]["output_tokens"]


def test_conversations_starting_at_once_read_their_shared_system_prompt_once(
    slots: Server,
) -> None:
    """Four sessions start together with a long system prompt no slot holds yet: one slot
    reads it, the other three wait for it and copy its cells (without the wait, each read
    it side by side with the first, all four to the end)."""
    system = " ".join(
        f"Policy {n}: cite the file, the line and the test you ran." for n in range(90)
    )
    bodies = [
        {"instructions": system, "input": f"Session {n}: name a colour.", "max_output_tokens": 4}
        for n in range(4)
    ]
    shared = count_tokens(slots, bodies[0]) - count_tokens(
        slots, {"input": "Session 0: name a colour."}
    )
    assert shared > 1024  # more than two of the engine's 512-token prompt chunks
    start = threading.Barrier(len(bodies))
    usages: dict[int, dict[str, Any]] = {}

    def send(n: int) -> None:
        start.wait()
        reply = httpx.post(f"{slots.base_url}/responses", json=bodies[n], timeout=TIMEOUT)
        assert reply.status_code == 200, reply.text
        usages[n] = reply.json()["usage"]

    threads = [threading.Thread(target=send, args=(n,)) for n in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert len(usages) == len(bodies)
    cached = sorted(u["input_tokens_details"]["cached_tokens"] for u in usages.values())
    worth = copy_worth(4096)  # the slots' context: respond's default
    assert cached[0] < shared  # the first read it
    assert all(c >= shared - worth for c in cached[1:]), (shared, cached)


def test_cancelling_one_stream_leaves_the_others_whole(slots: Server) -> None:
    since = len(slots.log())
    body = {"input": STORY, "max_output_tokens": 48, "temperature": 0}
    others = [Stream(slots, body) for _ in range(3)]
    gone = Stream(slots, {"input": STORY, "max_output_tokens": 2000}, stop_after=3).join()
    assert not gone.terminal  # it hung up mid-stream
    for stream in others:
        stream.join()
        assert len(stream.terminal) == 1
        assert stream.response["status"] == "incomplete"
        assert stream.response["usage"]["output_tokens"] == 48
    wait_until(lambda: "generation cancelled" in slots.log()[since:], "the cancel was logged")
    cancelled = re.findall(r"generation cancelled after (\d+) tokens", slots.log()[since:])
    assert len(cancelled) == 1 and int(cancelled[0]) < 200


def test_a_full_queue_answers_429_with_retry_after(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "2", "--parallel", "1", "--queue-max", "0")
    try:
        busy = Stream(server, {"input": STORY, "max_output_tokens": 2000, "temperature": 0})
        wait_until(lambda: len(busy.deltas) >= 2, "the only slot is busy")
        health = httpx.get(f"{server.url}/health", timeout=TIMEOUT).json()
        assert health["models"][MODEL] == {
            "slots": 1, "busy_slots": 1, "queued": 0, "layers": "31/31 layers on CPU"
        }  # fmt: skip

        responses = httpx.post(
            f"{server.base_url}/responses", json={"input": "hi"}, timeout=TIMEOUT
        )
        assert responses.status_code == 429, responses.text
        assert int(responses.headers["Retry-After"]) >= 1
        error = responses.json()["error"]
        assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"

        chat = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
            timeout=TIMEOUT,
        )
        assert chat.status_code == 429 and int(chat.headers["Retry-After"]) >= 1
        assert chat.json()["error"]["code"] == "rate_limit_exceeded"

        messages = httpx.post(
            f"{server.base_url}/messages",
            json={"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
            timeout=TIMEOUT,
        )
        assert messages.status_code == 429 and int(messages.headers["Retry-After"]) >= 1
        assert messages.json()["type"] == "error"
        assert messages.json()["error"]["type"] == "overloaded_error"

        streamed = httpx.post(
            f"{server.base_url}/responses", json={"input": "hi", "stream": True}, timeout=TIMEOUT
        )
        assert streamed.status_code == 429  # refused before the stream starts
        assert busy.thread.is_alive()
        busy.hang_up.set()
        busy.join()
    finally:
        server.stop()
