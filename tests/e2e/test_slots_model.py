"""What a slot keeps of its cache, on the real bundled model's context."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from typing import Any

import llama_cpp
import numpy as np
import pytest

from respond.engines.llamacpp import bundled_model_path
from respond.engines.llamacpp._job import Feed
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._preempt import ABORTED
from respond.engines.llamacpp._slot import Slot
from respond.engines.llamacpp._slots import fill_batch
from tests.support.slots import busy, native_batch, ran


@pytest.fixture(scope="module")
def model() -> Iterator[NativeModel]:
    native = NativeModel(str(bundled_model_path()), n_ctx=256, n_slots=2, n_threads=1, n_batch=64)
    yield native
    native.close()


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


def test_models_loading_at_once_leave_stdout_and_stderr_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config file's models load in parallel threads. llama-cpp-python quiets a load by
    pointing file descriptors 1 and 2 at /dev/null and back again; two loads at once put
    back each other's /dev/null, and the server's log was gone for good. The engine's
    loads touch neither (llama.cpp's own log is quieted by its callback instead)."""
    moved: list[int] = []
    dup2 = os.dup2

    def spy(fd: int, fd2: int, *args: Any) -> int:
        moved.append(fd2)
        return dup2(fd, fd2, *args)

    monkeypatch.setattr(os, "dup2", spy)
    before = [os.fstat(fd).st_ino for fd in (1, 2)]

    def load() -> None:
        NativeModel(
            str(bundled_model_path()), n_ctx=256, n_slots=1, n_threads=1, n_batch=64
        ).close()

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert moved == []
    assert [os.fstat(fd).st_ino for fd in (1, 2)] == before


def test_a_restored_state_gives_the_logits_evaluating_the_prompt_gives(model: NativeModel) -> None:
    """The prompt cache beyond the slots: cells saved from one sequence and restored into
    another (after the first was overwritten) are the cells evaluating the prompt makes."""
    prompt = model.tokenize(b"You are a careful assistant. Say hello.", add_bos=True, special=False)
    with native_batch(64) as batch:
        try:
            evaluated = busy(0, [], list(prompt), 0.0)
            fill_batch(batch, [evaluated], room=64)
            assert model.decode(batch) == 0
            expected = model.logits(batch.n_tokens - 1).copy()
            state = model.save(0)
            assert state is not None and len(state) > 0
            evaluated.forget(model)  # another conversation takes the slot
            restored = Slot(1)
            assert restored.restore(prompt, state, model)
            assert restored.apply(Feed(prompt, fresh=True), model) == len(prompt) - 1
            restored.job = evaluated.job
            outputs, _ = fill_batch(batch, [restored], room=64)
            assert batch.n_tokens == 1 and model.decode(batch) == 0
            assert np.allclose(model.logits(outputs[0][1]), expected, atol=1e-3)
        finally:
            for seq in (0, 1):
                model.keep(seq, 0)


@pytest.mark.parametrize("damage", ["truncated", "not a state"])
def test_a_state_llama_cpp_refuses_leaves_the_slot_empty_and_the_prompt_is_evaluated(
    model: NativeModel, damage: str
) -> None:
    prompt = model.tokenize(b"Name three colours, please.", add_bos=True, special=False)
    with native_batch(64) as batch:
        try:
            evaluated = busy(0, [], list(prompt), 0.0)
            fill_batch(batch, [evaluated], room=64)
            assert model.decode(batch) == 0
            expected = model.logits(batch.n_tokens - 1).copy()
            state = model.save(0)
            assert state is not None
            broken = (ctypes.c_uint8 * (len(state) // 2))()
            if damage == "truncated":
                ctypes.memmove(broken, state, len(broken))
            target = ran(Slot(1), [5, 6, 7], [8], used_at=1.0)  # what the slot held before
            assert not target.restore(prompt, broken, model)
            assert target.held == [] and target.pending == []
            # Evaluated instead: the same logits as the first evaluation.
            assert target.apply(Feed(prompt, fresh=True), model) == 0
            target.job = evaluated.job
            outputs, _ = fill_batch(batch, [target], room=64)
            assert model.decode(batch) == 0
            assert np.allclose(model.logits(outputs[0][1]), expected, atol=1e-3)
        finally:
            for seq in (0, 1):
                model.keep(seq, 0)


def _seq_end(model: NativeModel, seq: int) -> int:
    return int(llama_cpp.llama_memory_seq_pos_max(model.memory, seq))


def test_a_stopped_step_leaves_no_cells_and_reads_again_the_same(model: NativeModel) -> None:
    """llama.cpp's abort callback as respond sets it (libc's strlen on the flag): an armed
    step with a request waiting stops, llama.cpp drops what it wrote, and the same chunk
    then reads as if never tried; a disarmed flag stops nothing."""
    prompt = model.tokenize(
        b"One two three four five six seven eight nine ten " * 5, add_bos=True, special=False
    )[:60]
    model.keep(0, 0)
    with native_batch(64) as batch:
        slot = busy(0, [], list(prompt), arrived=1.0)
        fill_batch(batch, [slot], room=64)
        model.preempt.arm(now=True)
        try:
            assert model.decode(batch) == ABORTED
        finally:
            model.preempt.disarm()
        assert _seq_end(model, 0) == -1  # nothing of the chunk kept
        model.preempt.request()  # not armed: nothing to stop
        assert model.decode(batch) == 0
        assert _seq_end(model, 0) == len(prompt) - 1
    model.keep(0, 0)
