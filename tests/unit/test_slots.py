"""Which slot a prompt goes to, and what a slot keeps of its cache (the real model's context)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, cast

import llama_cpp
import numpy as np
import pytest

from respond.engines.llamacpp import bundled_model_path
from respond.engines.llamacpp._job import Feed, Job
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._slot import Slot
from respond.engines.llamacpp._slots import _choose, _source, fill_batch


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


def busy(seq: int, held: list[int], pending: list[int], arrived: float) -> Slot:
    slot = Slot(seq, held=held, pending=pending)
    slot.job = cast(Job, SimpleNamespace(arrived=arrived))  # fill_batch reads only this
    return slot


@contextmanager
def native_batch(size: int) -> Iterator[Any]:
    """A llama.cpp batch of `size` tokens, freed after."""
    batch = llama_cpp.llama_batch_init(size, 0, 1)
    try:
        yield batch
    finally:
        llama_cpp.llama_batch_free(batch)


def test_the_batch_lists_its_slots_by_sequence_id_whatever_their_arrival() -> None:
    """llama.cpp decodes a non-unified cache's sequences in one pass only in increasing id
    order; a batch listed by arrival was split into one pass per slot."""
    late, first, prefill = (
        busy(0, [1, 2], [3], 9.0),
        busy(2, [4], [5], 1.0),
        busy(1, [], [6, 7], 0.0),
    )
    with native_batch(8) as batch:
        outputs, included = fill_batch(batch, [late, prefill, first], room=8)
        rows = [(batch.seq_id[i][0], batch.pos[i], batch.token[i]) for i in range(batch.n_tokens)]
        assert rows == [(0, 2, 3), (1, 0, 6), (1, 1, 7), (2, 1, 5)]
        assert [bool(batch.logits[i]) for i in range(batch.n_tokens)] == [True, False, True, True]
        assert outputs == [(late, 0), (prefill, 2), (first, 3)]
        assert included == [late, prefill, first]
        assert late.held == [1, 2, 3] and not late.pending


def test_decoding_slots_get_the_room_before_a_prompt_chunk() -> None:
    decoding, prefill = busy(1, [1], [2], 5.0), busy(0, [], [7, 8, 9, 10], 1.0)
    with native_batch(3) as batch:
        outputs, _ = fill_batch(batch, [prefill, decoding], room=3)
        rows = [(batch.seq_id[i][0], batch.token[i]) for i in range(batch.n_tokens)]
        assert rows == [(0, 7), (0, 8), (1, 2)]  # the prompt's first two tokens, then the stream's
        assert outputs == [(decoding, 2)] and prefill.pending == [9, 10]


def test_a_prefix_held_by_another_slot_is_copied_not_evaluated(model: NativeModel) -> None:
    """The copied cells give the logits evaluating the prompt gives (the real context)."""
    prompt = model.tokenize(b"You are a careful assistant. Say hello.", add_bos=True, special=False)
    with native_batch(64) as batch:
        try:
            evaluated = busy(0, [], list(prompt), 0.0)
            fill_batch(batch, [evaluated], room=64)
            assert model.decode(batch) == 0
            expected = model.logits(batch.n_tokens - 1).copy()
            copy = Slot(1)
            copy.copy_from(evaluated, model)
            assert copy.apply(Feed(prompt, fresh=True), model) == len(prompt) - 1
            copy.job = evaluated.job
            outputs, _ = fill_batch(batch, [copy], room=64)
            assert batch.n_tokens == 1 and model.decode(batch) == 0
            assert np.allclose(model.logits(outputs[0][1]), expected, atol=1e-3)
        finally:
            for seq in (0, 1):
                model.keep(seq, 0)


def test_cells_are_copied_only_when_they_spare_enough_of_the_prompt() -> None:
    system = list(range(100, 140))  # a shared system prompt of 40 tokens
    holder = ran(Slot(0), [*system, 1, 2], [3], used_at=1.0)
    chosen = Slot(1)
    assert _source([holder, chosen], chosen, [*system, 7, 8], worth=16) is holder
    assert _source([holder, chosen], chosen, [*system, 7, 8], worth=41) is None
    assert _source([holder, chosen], chosen, [9, *system], worth=16) is None  # no prefix
    # The chosen slot's own prefix counts: copying must spare more than it already holds.
    own = ran(Slot(1), [*system[:30]], [], used_at=0.5)
    assert _source([holder, own], own, [*system, 7], worth=16) is None
