"""The prompt cache beyond the slots, its bookkeeping (states are opaque payloads here:
tests/e2e/test_slots_model.py saves and restores real ones)."""

from __future__ import annotations

import random

from respond.engines._base import ChatMessage, ChatTurn
from respond.engines.formats import HERMES, Chosen
from respond.engines.llamacpp._cache import PromptCache
from respond.engines.llamacpp._prompt import render_prompt
from respond.engines.llamacpp._slot import common_prefix
from respond.engines.llamacpp._template import ChatTemplate
from tests.support.templates import template_dir

SYSTEM = list(range(1000, 1040))  # a system prompt every conversation shares


def conversation(n: int, length: int) -> list[int]:
    return [*SYSTEM, *(n * 100 + k for k in range(length))]


def test_the_entry_sharing_the_longest_prefix_is_found() -> None:
    cache = PromptCache(limit=1000)
    first, second = conversation(1, 10), conversation(2, 10)
    cache.keep(first, "one", 10)
    cache.keep(second, "two", 10)
    found = cache.find([*second[:45], 7, 7])
    assert found is not None and found[0].state == "two" and found[1] == 45
    # Only the system prompt in common: either entry spares it, no more.
    found = cache.find([*SYSTEM, 5])
    assert found is not None and found[1] == len(SYSTEM)
    assert cache.find([9, *SYSTEM]) is None  # nothing shared from the start


def test_the_oldest_entries_go_to_keep_the_bound_in_bytes() -> None:
    cache = PromptCache(limit=130)
    for n in range(4):
        assert cache.keep(conversation(n, 5), n, 40)
    # 4 x 40 > 130: the oldest went; the bound counts the states' bytes.
    assert [entry.state for entry in cache.entries()] == [1, 2, 3]
    assert cache.held == 120 <= cache.limit and cache.evictions == 1
    assert cache.hits == 0


def test_an_entry_restored_into_a_slot_is_the_first_to_go() -> None:
    """Its slot holds the same cells (saved again when it is overwritten): with four
    conversations taking turns on two slots, the state a conversation saves as it leaves
    its slot evicts the one just restored, not the one whose turn comes next."""
    cache = PromptCache(limit=100)
    cache.keep(conversation(1, 5), 1, 40)
    cache.keep(conversation(2, 5), 2, 40)
    found = cache.find(conversation(1, 6))
    assert found is not None and found[0].state == 1
    cache.used(found[0], found[1])
    assert cache.keep(conversation(3, 5), 3, 40)
    assert [entry.state for entry in cache.entries()] == [2, 3]
    assert cache.hits == 1 and cache.restored_tokens == len(SYSTEM) + 5


def test_a_state_larger_than_the_bound_is_not_kept_and_evicts_nothing() -> None:
    cache = PromptCache(limit=100)
    cache.keep(conversation(1, 5), "small", 60)
    assert not cache.keep(conversation(2, 500), "huge", 101)
    assert [entry.state for entry in cache.entries()] == ["small"] and cache.held == 60


def test_a_continued_conversation_replaces_the_entries_it_extends() -> None:
    cache = PromptCache(limit=1000)
    turn1 = conversation(1, 10)
    turn2 = [*turn1, 50, 51, 52]
    cache.keep(turn1, "turn 1", 10)
    cache.keep(conversation(2, 10), "other", 10)
    assert cache.keep(turn2, "turn 2", 13)
    assert sorted(entry.state for entry in cache.entries()) == ["other", "turn 2"]
    assert cache.held == 23 and cache.evictions == 0  # replaced, not evicted for room
    # What an entry already holds is not kept twice.
    assert cache.holds(turn1) and not cache.keep(turn1, "turn 1 again", 10)
    assert len(cache) == 2


def test_an_entry_llama_cpp_refused_is_dropped() -> None:
    cache = PromptCache(limit=1000)
    cache.keep(conversation(1, 10), "broken", 10)
    found = cache.find(conversation(1, 10))
    assert found is not None
    cache.drop(found[0])
    assert len(cache) == 0 and cache.held == 0 and cache.find(conversation(1, 10)) is None


def test_off_at_zero() -> None:
    cache = PromptCache(limit=0)
    assert not cache.enabled
    assert not cache.keep(conversation(1, 3), "x", 1) and len(cache) == 0


def test_the_report_says_what_it_holds_and_counted() -> None:
    cache = PromptCache(limit=50)
    cache.keep(conversation(1, 3), "a", 30)
    cache.keep(conversation(2, 3), "b", 30)
    cache.misses += 2
    report = cache.report()
    assert (report.limit_bytes, report.bytes, report.entries) == (50, 30, 1)
    assert (report.saves, report.evictions, report.misses, report.hits) == (2, 1, 2, 0)


def test_common_prefix_agrees_with_a_token_by_token_walk() -> None:
    rng = random.Random(24)
    for _ in range(2000):
        a = [rng.randrange(3) for _ in range(rng.randrange(40))]
        b = a[: rng.randrange(len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(5))]
        walked = 0
        while walked < min(len(a), len(b)) and a[walked] == b[walked]:
            walked += 1
        assert common_prefix(a, b) == walked == common_prefix(b, a)


def test_an_entry_saved_before_a_template_change_spares_only_the_tokens_it_shares() -> None:
    """An entry's tokens are what its cells hold: after the template changes (a model
    served again with --chat-template-file), a conversation saved under the old one is
    found for the prompt the new one renders only as far as their tokens agree."""
    turn = ChatTurn(
        model="m",
        messages=[ChatMessage("system", "You help travellers."), ChatMessage("user", "Rain?")],
    )
    chosen = Chosen(HERMES, None, "rendered probe")
    old, new = (
        render_prompt(
            ChatTemplate((template_dir() / f"{stem}.jinja").read_text()), turn, chosen=chosen
        )
        for stem in ("Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    )
    # Both ChatML; Hermes 3 puts its own system turn first ("You are a function calling").
    agreed = len("<|im_start|>system\nYou ")
    assert old[:agreed] == new[:agreed] and old[agreed] != new[agreed]
    cache = PromptCache(limit=1000)
    cache.keep([ord(c) for c in old], "cells", 10)  # a token a character
    found = cache.find([ord(c) for c in new])
    assert found is not None and found[1] == agreed
