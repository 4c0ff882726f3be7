"""Slots as a finished or running job leaves them, and llama.cpp batches, for the slot tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, cast

import llama_cpp

from respond.engines.llamacpp._job import Job
from respond.engines.llamacpp._slot import Slot

__all__ = ["busy", "native_batch", "ran"]


def ran(slot: Slot, prompt: list[int], output: list[int], used_at: float) -> Slot:
    """`slot` as a finished job on `prompt` (which wrote `output`) leaves it."""
    slot.held, slot.prompt_len, slot.used_at = prompt + output, len(prompt), used_at
    return slot


def busy(seq: int, held: list[int], pending: list[int], arrived: float) -> Slot:
    """A slot whose job's prompt is `held + pending`: read as far as `held`."""
    slot = Slot(seq, held=held, pending=pending)
    # fill_batch reads only the arrival, the scheduler's choices the prompt too.
    slot.job = cast(Job, SimpleNamespace(arrived=arrived, tokens=held + pending))
    return slot


@contextmanager
def native_batch(size: int) -> Iterator[Any]:
    """A llama.cpp batch of `size` tokens, freed after."""
    batch = llama_cpp.llama_batch_init(size, 0, 1)
    try:
        yield batch
    finally:
        llama_cpp.llama_batch_free(batch)
