"""Which slot a prompt goes to, and how a batch is filled (no model: tests/e2e/test_slots_model.py
has the cases that need the real model's context)."""

from __future__ import annotations

from respond.engines.llamacpp._slot import Slot
from respond.engines.llamacpp._slots import _choose, _reader, _source, fill_batch
from tests.support.slots import busy, native_batch, ran


def test_a_conversation_goes_back_to_the_slot_it_continues() -> None:
    system = [1, 2, 3]
    other = ran(Slot(0), [*system, 10, 11], [12], used_at=5.0)
    mine = ran(Slot(1), [*system, 20, 21], [22], used_at=1.0)
    assert _choose([other, mine], lambda _: [*system, 20, 21, 22, 30]) is mine


def test_a_conversation_is_recognised_as_its_slot_spells_it() -> None:
    """The slot's last prompt held a reply the model wrote as 21, 22, which the next prompt,
    tokenized afresh, reads as one token (23, the same text): spelled with the slot's own
    tokens, the prompt continues the slot."""
    system = [1, 2, 3]
    mine = ran(Slot(0), [*system, 20, 21, 22, 24], [25], used_at=1.0)
    fresh = Slot(1)
    afresh = [*system, 20, 23, 24, 25, 30]

    def spelled(slot: Slot) -> list[int]:
        return [*system, 20, 21, 22, 24, 25, 30] if slot is mine else afresh

    assert _choose([fresh, mine], spelled) is mine
    assert _choose([fresh, mine], lambda _: afresh) is fresh  # compared afresh: missed


def test_a_new_conversation_takes_an_unused_slot_before_evicting_one() -> None:
    system = [1, 2, 3]
    busy_before = ran(Slot(0), [*system, 10], [11], used_at=5.0)
    assert _choose([busy_before, Slot(1)], lambda _: [*system, 40]) is not busy_before


def test_with_every_slot_holding_a_conversation_the_least_recently_used_goes() -> None:
    recent = ran(Slot(0), [1, 10], [11], used_at=9.0)
    old = ran(Slot(1), [1, 20], [21], used_at=2.0)
    assert _choose([recent, old], lambda _: [1, 30]) is old


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


def test_a_short_prompt_is_read_before_a_long_one_that_came_first() -> None:
    """A short request arriving while a long prompt is read gets its first token after one
    step, not after the whole long prompt."""
    long, short = busy(0, [], list(range(100, 120)), 1.0), busy(1, [], [7, 8], 2.0)
    with native_batch(8) as batch:
        outputs, _ = fill_batch(batch, [long, short], room=8)
        rows = [(batch.seq_id[i][0], batch.token[i]) for i in range(batch.n_tokens)]
        assert rows == [(0, t) for t in range(100, 106)] + [(1, 7), (1, 8)]
        assert outputs == [(short, 7)] and len(long.pending) == 14


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


def test_a_prompt_waits_for_the_slot_still_reading_the_prefix_it_shares() -> None:
    """Sessions that start at once with one system prompt: the first reads it, the others
    wait and copy it, instead of each reading it side by side."""
    system = list(range(100, 200))  # a shared system prompt of 100 tokens
    reading = busy(0, system[:30], [*system[30:], 1, 2], arrived=1.0)
    idle = Slot(1)
    assert _reader([reading, idle], [*system, 7, 8], worth=16) is reading
    # Once it has read all but a few of the shared tokens, copying them now is as good.
    reading.held, reading.pending = system[:90], [*system[90:], 1, 2]
    assert _reader([reading, idle], [*system, 7, 8], worth=16) is None


def test_no_wait_for_a_prefix_held_elsewhere_or_too_short() -> None:
    system = list(range(100, 200))
    reading = busy(0, [], [*system, 1, 2], arrived=1.0)
    prompt = [*system, 7, 8]
    assert _reader([reading], [*system[:10], 9], worth=16) is None  # shares 10 tokens
    holder = ran(Slot(1), [*system, 3], [4], used_at=1.0)
    assert _reader([reading, holder], prompt, worth=16) is None  # an idle slot holds it
    assert _reader([reading], prompt, worth=16, cached=100) is None  # the cache holds it
    assert _reader([reading], prompt, worth=16, cached=50) is reading
    done = busy(2, [*system, 1, 2, 5], [], arrived=0.5)  # decoding: it read its prompt
    assert _reader([done], prompt, worth=16) is None
