"""The prompt cache beyond the slots: KV states of conversations that left their slot.

A slot keeps its cells when its job ends, but with more conversations than slots a
conversation's slot is taken by another before it comes back, and its next turn would read
its whole history again. So before a slot's cells are overwritten, the scheduler saves them
here (llama.cpp's per-sequence state, copied to host memory), and a later prompt that starts
with the same tokens has them restored into whichever slot it gets: it evaluates only what
is new.

This module is the bookkeeping only, with states as opaque payloads: at most `limit` bytes
of them (the payloads' sizes; the token lists beside them are a few bytes a token against
tens of kilobytes of cells), found by the longest common token prefix. When room is needed,
entries restored into a slot go first (the slot holds their cells now), then the least
recently saved. An entry's tokens are exactly what its cells hold, so an entry is only
ever used for the prefix its tokens share with a prompt: a prompt rendered otherwise (another
template, other instructions) shares fewer tokens and reuses only those.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from respond.engines._base import PromptCacheLoad
from respond.engines.llamacpp._slot import common_prefix

__all__ = ["PromptCache", "Saved"]


@dataclass(frozen=True)
class Saved:
    """One saved sequence: the tokens its cells hold, and llama.cpp's copy of those cells."""

    tokens: list[int]
    state: Any  # llama.cpp's serialized sequence (a ctypes byte array), or a test's
    size: int  # the state's bytes


class PromptCache:
    """Saved sequences, at most `limit` bytes of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0  # bytes of every entry's state
        self._entries: OrderedDict[int, Saved] = OrderedDict()  # the first to go first
        self._next = 0
        # What /metrics shows (engines/_base.py: PromptCacheLoad).
        self.hits = 0  # prompts whose prefix was restored from here
        self.misses = 0  # prompts looked up that found nothing worth restoring
        self.saves = 0
        self.evictions = 0  # entries dropped for room
        self.restored_tokens = 0
        self.failures = 0  # restores llama.cpp refused (the prompt was evaluated instead)

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Saved]:
        """Every entry, the first to go first."""
        return list(self._entries.values())

    def find(self, tokens: list[int]) -> tuple[Saved, int] | None:
        """The entry sharing the longest prefix with `tokens`, and that prefix's length."""
        best: tuple[Saved, int] | None = None
        for entry in self._entries.values():
            shared = common_prefix(entry.tokens, tokens)
            if shared > 0 and (best is None or shared > best[1]):
                best = (entry, shared)
        return best

    def holds(self, tokens: list[int]) -> bool:
        """Whether an entry already holds `tokens` (they are a prefix of its own)."""
        return any(_starts_with(entry.tokens, tokens) for entry in self._entries.values())

    def used(self, entry: Saved, restored: int) -> None:
        """`entry` was restored into a slot for a prompt, sparing `restored` tokens. It
        stays, as the first to go when room is needed: the slot holds the same cells now,
        saved again (continued, so over this entry) when the slot is overwritten; kept
        meanwhile for the prompts that share its prefix only (a system prompt)."""
        for key, held in self._entries.items():
            if held is entry:
                self._entries.move_to_end(key, last=False)
                break
        self.hits += 1
        self.restored_tokens += restored

    def keep(self, tokens: list[int], state: Any, size: int) -> bool:
        """Save a sequence's state; False when it is larger than the whole bound or an
        entry already holds its tokens. Entries it continues are dropped (it serves every
        prompt they would, and more), then the least recently used until it fits."""
        if size > self.limit or self.holds(tokens):
            return False
        for key, entry in list(self._entries.items()):
            if _starts_with(tokens, entry.tokens):
                self._remove(key)
        while self.held + size > self.limit:
            self._remove(next(iter(self._entries)))
            self.evictions += 1
        self._entries[self._next] = Saved(list(tokens), state, size)
        self._next += 1
        self.held += size
        self.saves += 1
        return True

    def drop(self, entry: Saved) -> None:
        """Forget `entry` (llama.cpp would not restore it)."""
        for key, held in list(self._entries.items()):
            if held is entry:
                self._remove(key)

    def _remove(self, key: int) -> None:
        self.held -= self._entries.pop(key).size

    def report(self) -> PromptCacheLoad:
        return PromptCacheLoad(
            limit_bytes=self.limit,
            bytes=self.held,
            entries=len(self._entries),
            hits=self.hits,
            misses=self.misses,
            saves=self.saves,
            evictions=self.evictions,
            restored_tokens=self.restored_tokens,
            failures=self.failures,
        )


def _starts_with(tokens: list[int], prefix: list[int]) -> bool:
    return len(prefix) <= len(tokens) and tokens[: len(prefix)] == prefix
