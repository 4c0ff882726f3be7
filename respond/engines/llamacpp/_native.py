"""Calling llama.cpp where it cannot take the process down, and off the event loop.

llama.cpp's grammar parser recurses once per nesting level of a grammar: on a default
8 MiB thread stack a deeply nested grammar overflows it and the whole process dies
(SIGSEGV). Every thread that parses a grammar (the checks at prepare time and the
generation thread) therefore gets BIG_STACK, far more than any grammar within the
request limits needs; it is address space, not memory, until used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

__all__ = ["BIG_STACK", "CPU_WORKERS", "CpuWork", "big_stack_thread", "on_big_stack"]

BIG_STACK = 256 * 1024 * 1024
# Rendering, tokenizing and grammar building at once, at most: more would only slow each
# other down and starve generation of cores.
CPU_WORKERS = 2

T = TypeVar("T")

_stack_size_lock = threading.Lock()


def big_stack_thread(
    target: Callable[..., None], args: tuple[Any, ...], name: str
) -> threading.Thread:
    """Start a daemon thread with BIG_STACK. threading.stack_size is process-wide, so it
    is set and restored under a lock around this one thread's start."""
    with _stack_size_lock:
        previous = threading.stack_size(BIG_STACK)
        try:
            thread = threading.Thread(target=target, args=args, name=name, daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    return thread


def on_big_stack(fn: Callable[[], T]) -> T:
    """Run `fn` on a BIG_STACK thread and wait for it (blocking: call from a worker)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            failure.append(exc)

    big_stack_thread(run, (), "respond-grammar").join()
    if failure:
        raise failure[0]
    return result[0]


class CpuWork:
    """Runs blocking CPU work in worker threads, at most CPU_WORKERS at a time."""

    def __init__(self) -> None:
        self._limiter: anyio.CapacityLimiter | None = None  # made in the serving loop

    async def run(self, fn: Callable[[], T]) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(CPU_WORKERS)
        return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
