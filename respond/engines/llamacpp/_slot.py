"""One slot: a sequence of the shared context, what its KV cells hold, and its job.

A slot keeps its cells when its job ends: they are the prompt cache of the conversation
that ran there, reused by the next request whose prompt starts the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from respond.engines.llamacpp._job import Feed, Job
from respond.engines.llamacpp._media import shift_of, whole_images
from respond.engines.llamacpp._model import NativeModel

__all__ = ["Slot", "common_prefix"]


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens `a` and `b` share from their start. Slices are compared in C,
    halving the range that holds the first difference: prompts of thousands of tokens are
    compared against every slot and saved state at each admission."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    same, differs = 0, n  # a[:same] == b[:same]; a[:differs] != b[:differs]
    while differs - same > 1:
        middle = (same + differs) // 2
        if a[same:middle] == b[same:middle]:
            same = middle
        else:
            differs = middle
    return same


@dataclass
class Slot:
    seq: int  # the llama.cpp sequence id
    held: list[int] = field(default_factory=list)  # tokens whose KV cells this sequence has
    pending: list[int] = field(default_factory=list)  # to evaluate before the next sample
    feed: Feed | None = None  # the job's latest feed, applied at the next step
    job: Job | None = None
    used_at: float = 0.0  # when its last job ended (least recently used goes first)
    prompt_len: int = 0  # the prompt length of its last job
    # A copy to or from this sequence waits for the next decode (llama.cpp copies the
    # cells across streams then): its cells must not be saved or overwritten meanwhile.
    copying: bool = False
    # How many fewer positions than tokens `held` takes: an image on a model with M-RoPE
    # takes fewer positions than it has embeddings (_media.py); 0 for any other.
    shift: int = 0

    @property
    def position(self) -> int:
        """Where the next token of the sequence goes."""
        return len(self.held) - self.shift

    def continues(self, tokens: list[int]) -> bool:
        """Whether `tokens` starts with the whole prompt of this slot's last job."""
        return self.prompt_len > 0 and common_prefix(self.held, tokens) >= self.prompt_len

    def reuse(self, tokens: list[int]) -> int:
        """How many of a prompt's tokens this slot's cells would spare evaluating."""
        # llama.cpp must evaluate at least the last prompt token again to get logits.
        return min(common_prefix(self.held, tokens), len(tokens) - 1)

    def apply(self, feed: Feed, model: NativeModel) -> int:
        """Make the job's feed pending; for a fresh one, drop the cells past the common
        prefix first. Returns how many tokens were reused."""
        if not feed.fresh:
            self.pending = list(feed.tokens)
            return 0
        kept = whole_images(feed.tokens, max(self.reuse(feed.tokens), 0))
        if kept < len(self.held):
            self.shift = shift_of(self.held[:kept])
            model.keep(self.seq, kept - self.shift)
            del self.held[kept:]
        self.pending = list(feed.tokens[kept:])
        return kept

    def copy_from(self, other: Slot, model: NativeModel) -> None:
        """Hold a copy of `other`'s cells (the next fresh feed drops what is not shared)."""
        model.copy(other.seq, self.seq)
        self.held = list(other.held)
        self.shift = other.shift
        self.copying = other.copying = True

    def restore(self, tokens: list[int], state: Any, model: NativeModel) -> bool:
        """Hold the cells saved in `state` (they hold `tokens`), written now. On a failure
        the slot holds nothing (llama.cpp leaves the sequence empty or as it was)."""
        if model.restore(self.seq, state):
            self.held = list(tokens)
            self.shift = shift_of(self.held)
            return True
        self.forget(model)
        return False

    def forget(self, model: NativeModel) -> None:
        """Drop every cell (after a failed decode their contents are unknown)."""
        model.keep(self.seq, 0)
        self.held.clear()
        self.shift = 0
        self.pending.clear()
