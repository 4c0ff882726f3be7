"""The prompt cache beyond the slots (--cache-ram), on the real server and model: more
conversations than slots, each later turn restoring its own history instead of reading it
again, with the answers a server without the cache gives."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import Samples, moved, scrape, value
from tests.support.server import Server, start_server

MODEL = "smollm2-135m"
TIMEOUT = 600  # a loaded two-core machine is slow; never a timed assertion
MIB = 1024 * 1024
TIGHT_MIB = 10  # one conversation's saved state (6 to 10 MiB here), never two
SYSTEM = " ".join(
    f"Rule {n}: answer briefly, politely and in plain words, never in lists." for n in range(12)
)
TOPICS = ["apples", "rivers", "castles", "violins"]  # four conversations on two slots
TURNS = 3


def question(session: int, turn: int, tag: str) -> str:
    topic = TOPICS[session]
    return (
        f"{tag}Conversation {session}, question {turn}: tell me one more short fact about {topic}, "
        f"something a child could remember about {topic}, where {topic} are found, and why "
        f"people have cared about {topic} for such a long time."
    )


@dataclass
class Traffic:
    """What a server answered to the conversations, turn by turn, and its metrics meanwhile."""

    answers: dict[tuple[int, int], str] = field(default_factory=dict)
    usage: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    scrapes: list[Samples] = field(default_factory=list)
    log: str = ""


class Conversation:
    """One session: even ones resend their whole history (`store: false`, as Codex and Chat
    Completions agents do), odd ones chain with previous_response_id."""

    def __init__(self, server: Server, session: int, tag: str = "") -> None:
        self.server, self.session, self.tag = server, session, tag
        self.history: list[dict[str, str]] = []
        self.previous: str | None = None

    def turn(self, k: int) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": MODEL,
            "instructions": SYSTEM,
            "max_output_tokens": 8,
            "temperature": 0,
        }
        if self.session % 2 == 0:
            self.history.append({"role": "user", "content": question(self.session, k, self.tag)})
            body |= {"input": self.history, "store": False}
        else:
            body["input"] = question(self.session, k, self.tag)
            if self.previous is not None:
                body["previous_response_id"] = self.previous
        reply = httpx.post(f"{self.server.base_url}/responses", json=body, timeout=TIMEOUT)
        assert reply.status_code == 200, reply.text
        response = reply.json()
        text = "".join(
            part["text"]
            for item in response["output"]
            if item["type"] == "message"
            for part in item["content"]
        )
        self.previous = response["id"]
        self.history.append({"role": "assistant", "content": text})
        return text, response["usage"]


def interleaved(server: Server, turns: int = TURNS) -> Traffic:
    """Turn k of every conversation one after another, then turn k + 1: each conversation
    comes back after two others took the two slots. One request at a time, so each is
    decoded alone and its answer at temperature 0 is the same on every server."""
    traffic = Traffic()
    since = len(server.log())
    conversations = [Conversation(server, n) for n in range(len(TOPICS))]
    for k in range(turns):
        for conversation in conversations:
            key = (conversation.session, k)
            traffic.answers[key], traffic.usage[key] = conversation.turn(k)
            traffic.scrapes.append(scrape(server.url))
    traffic.log = server.log()[since:]
    return traffic


def serve(tmp: Path, *args: str) -> Iterator[Server]:
    server = start_server(tmp, "--threads", "2", "--parallel", "2", *args)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("cached"), "--cache-ram", "256")


@pytest.fixture(scope="module")
def cached_run(cached: Server) -> Traffic:
    return interleaved(cached)


@pytest.fixture(scope="module")
def uncached_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    for server in serve(tmp_path_factory.mktemp("uncached"), "--cache-ram", "0"):
        yield interleaved(server)


@pytest.fixture(scope="module")
def tight_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    for server in serve(tmp_path_factory.mktemp("tight"), "--cache-ram", str(TIGHT_MIB)):
        yield interleaved(server, turns=2)


def cached_tokens(usage: dict[str, Any]) -> int:
    count: int = usage["input_tokens_details"]["cached_tokens"]
    return count


def test_each_later_turn_restores_its_conversation_instead_of_reading_it_again(
    cached_run: Traffic, uncached_run: Traffic
) -> None:
    for (session, k), usage in cached_run.usage.items():
        assert cached_tokens(usage) < usage["input_tokens"]  # the last one is evaluated
        if k == 0:
            continue
        before = cached_run.usage[(session, k - 1)]["input_tokens"]
        # Its slot held another conversation: the previous prompt (and answer) came back
        # from the cache, on the server with it, and only the shared system prompt without.
        assert cached_tokens(usage) >= before, (session, k)
        assert cached_tokens(uncached_run.usage[(session, k)]) < before, (session, k)
    assert cached_run.usage.keys() == uncached_run.usage.keys()


def test_the_answers_are_those_of_a_server_without_the_cache(
    cached_run: Traffic, uncached_run: Traffic, tight_run: Traffic
) -> None:
    assert cached_run.answers == uncached_run.answers
    assert tight_run.answers == {k: a for k, a in cached_run.answers.items() if k[1] < 2}
    assert all(cached_run.answers.values())
    for key, usage in cached_run.usage.items():
        assert usage["input_tokens"] == uncached_run.usage[key]["input_tokens"]


def test_the_metrics_and_the_log_count_hits_and_misses(
    cached_run: Traffic, uncached_run: Traffic
) -> None:
    last = cached_run.scrapes[-1]
    later_turns = len(TOPICS) * (TURNS - 1)
    # Each first turn is a miss (nothing saved holds it; the slots hold the system prompt
    # only); each later turn a hit.
    assert value(last, "respond_prompt_cache_hits_total", model=MODEL) == later_turns
    assert value(last, "respond_prompt_cache_misses_total", model=MODEL) == len(TOPICS)
    assert value(last, "respond_prompt_cache_restore_failures_total", model=MODEL) == 0
    restored = value(last, "respond_prompt_cache_restored_tokens_total", model=MODEL)
    later = [u for (_, k), u in cached_run.usage.items() if k > 0]
    # What usage calls cached also counts what the slot copied or its own cells held.
    assert sum(cached_tokens(u) for u in later) >= restored > 0
    held = value(last, "respond_prompt_cache_bytes", model=MODEL)
    assert 0 < held <= value(last, "respond_prompt_cache_limit_bytes", model=MODEL) == 256 * MIB
    assert value(last, "respond_prompt_cache_entries", model=MODEL) == len(TOPICS)
    assert len(re.findall(r"prompt cache: restored \d+ tokens", cached_run.log)) == later_turns
    assert len(re.findall(r"prompt cache: miss ", cached_run.log)) == len(TOPICS)
    off = uncached_run.scrapes[-1]
    assert value(off, "respond_prompt_cache_limit_bytes", model=MODEL) == 0
    assert value(off, "respond_prompt_cache_saves_total", model=MODEL) == 0
    assert "prompt cache:" not in uncached_run.log


def test_the_cache_stays_within_its_bound_dropping_the_oldest(tight_run: Traffic) -> None:
    limit = TIGHT_MIB * MIB
    for samples in tight_run.scrapes:
        assert value(samples, "respond_prompt_cache_limit_bytes", model=MODEL) == limit
        assert value(samples, "respond_prompt_cache_bytes", model=MODEL) <= limit
    last = tight_run.scrapes[-1]
    assert value(last, "respond_prompt_cache_evictions_total", model=MODEL) > 0
    # A conversation comes back after two others saved theirs: its own was dropped.
    assert value(last, "respond_prompt_cache_misses_total", model=MODEL) > len(TOPICS)


def test_conversations_sent_at_once_each_restore_their_own(cached: Server) -> None:
    """Four conversations at once on two slots: two wait, and each takes the slot of one
    that ended, saving it, and restores its own history (the two that start at once may
    find their own slot still holding it)."""
    before = scrape(cached.url)
    conversations = [Conversation(cached, n, "At once. ") for n in range(len(TOPICS))]
    usage: dict[tuple[int, int], dict[str, Any]] = {}

    def turn(conversation: Conversation, k: int) -> None:
        usage[(conversation.session, k)] = conversation.turn(k)[1]

    for k in range(2):
        threads = [threading.Thread(target=turn, args=(c, k)) for c in conversations]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        assert all((c.session, k) in usage for c in conversations)
    for session in range(len(TOPICS)):
        assert cached_tokens(usage[(session, 1)]) >= usage[(session, 0)]["input_tokens"]
    after = scrape(cached.url)
    assert moved(before, after, "respond_prompt_cache_hits_total", model=MODEL) >= 2
    assert moved(before, after, "respond_prompt_cache_restore_failures_total", model=MODEL) == 0
