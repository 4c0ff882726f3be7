"""Which slot a prompt goes to, and what a slot keeps of its cache (the real model's context)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from respond.engines.llamacpp import bundled_model_path
from respond.engines.llamacpp._job import Feed
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._slot import Slot
from respond.engines.llamacpp._slots import _choose


@pytest.fixture(scope="module")
def model() -> Iterator[NativeModel]:
    native = NativeModel(str(bundled_model_path()), n_ctx=256, n_slots=2, n_threads=1, n_batch=64)
    yield native
    native.close()


def ran(slot: Slot, prompt: list[int], output: list[int], used_at: float) -> Slot:
    """`slot` as a finished job on `prompt` (which wrote `output`) leaves it."""
    slot.held, slot.prompt_len, slot.used_at = prompt + output, len(prompt), used_at
    return slot


def test_a_fresh_feed_keeps_the_common_prefix_and_evaluates_the_rest(model: NativeModel) -> None:
    slot = ran(Slot(0), [1, 2, 3, 4], [5, 6], used_at=1.0)
    assert slot.apply(Feed([1, 2, 3, 4, 5, 9, 9], fresh=True), model) == 5
    assert slot.held == [1, 2, 3, 4, 5]
    assert slot.pending == [9, 9]


def test_the_same_prompt_again_evaluates_its_last_token(model: NativeModel) -> None:
    slot = ran(Slot(0), [1, 2, 3], [7], used_at=1.0)
    # llama.cpp needs the last prompt token evaluated again to sample after it.
    assert slot.apply(Feed([1, 2, 3], fresh=True), model) == 2
    assert slot.held == [1, 2] and slot.pending == [3]


def test_a_feed_that_is_not_fresh_appends(model: NativeModel) -> None:
    slot = ran(Slot(0), [1, 2], [], used_at=0.0)
    assert slot.apply(Feed([8]), model) == 0
    assert slot.held == [1, 2] and slot.pending == [8]


def test_a_conversation_goes_back_to_the_slot_it_continues() -> None:
    system = [1, 2, 3]
    other = ran(Slot(0), [*system, 10, 11], [12], used_at=5.0)
    mine = ran(Slot(1), [*system, 20, 21], [22], used_at=1.0)
    assert _choose([other, mine], [*system, 20, 21, 22, 30]) is mine


def test_a_new_conversation_takes_an_unused_slot_before_evicting_one() -> None:
    system = [1, 2, 3]
    busy_before = ran(Slot(0), [*system, 10], [11], used_at=5.0)
    assert _choose([busy_before, Slot(1)], [*system, 40]) is not busy_before


def test_with_every_slot_holding_a_conversation_the_least_recently_used_goes() -> None:
    recent = ran(Slot(0), [1, 10], [11], used_at=9.0)
    old = ran(Slot(1), [1, 20], [21], used_at=2.0)
    assert _choose([recent, old], [1, 30]) is old
