"""Stopping a decode step part-way when a request arrives: llama.cpp's abort callback.

A step that reads a long prompt alone carries `n_batch` tokens, about a second deep in a
prompt on two CPU cores; a request arriving meanwhile would wait for it. Instead the step
is stopped: llama.cpp asks the context's abort callback between the nodes of the graph it
computes, and when the callback says yes it drops what the step wrote into the cache and
`llama_decode` returns 2. The scheduler puts the chunk back and reads the newcomer first.

The callback is libc's `strlen` on a two-byte flag: nonzero (stop) when the scheduler has set
the first byte. No Python runs on llama.cpp's threads: a ctypes callback would take the GIL
at every node of every step, while the event loop streams.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import llama_cpp

__all__ = ["ABORTED", "Preempt"]

ABORTED = 2  # what llama_decode returns for a step its abort callback stopped

# `bool (*)(void *)`: strlen's result is 1 or 0 on the flag, read as a bool.
_STRLEN = ctypes.cast(ctypes.CDLL(None).strlen, llama_cpp.ggml_abort_callback)


class Preempt:
    """The flag a context's decode steps watch. Armed only around a step that may be
    stopped (one prompt's chunk, decoded alone); `request` from any thread stops it."""

    def __init__(self) -> None:
        self._flag = ctypes.create_string_buffer(2)  # b"\0\0": strlen 0, go on
        self._armed = False
        self._lock = threading.Lock()

    def install(self, params: Any) -> None:
        """Make the context created with `params` watch the flag."""
        params.abort_callback = _STRLEN
        params.abort_callback_data = ctypes.cast(self._flag, ctypes.c_void_p)

    def arm(self, *, now: bool) -> None:
        """The next decode may be stopped; `now`: a request is already waiting."""
        with self._lock:
            self._armed = True
            self._flag[0] = b"\x01" if now else b"\x00"

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
            self._flag[0] = b"\x00"

    def request(self) -> None:
        """A request arrived: stop the armed step, if one is being decoded."""
        with self._lock:
            if self._armed:
                self._flag[0] = b"\x01"
