"""How many tokens one decode step may carry: as many as the hardware reads in `STEP_SECONDS`.

A request that arrives while a step is being decoded waits for that step to end, then for its
own. With steps of `n_batch` (512) prompt tokens, a step deep in a long prompt took about a
second on two CPU cores, so a short request beside an 8k-token prompt answered 47 times later
than alone (docs/benchmarks.md). Steps that last about `STEP_SECONDS` bound that wait whatever
the hardware: the pace measures the seconds per token of the steps it limited and sizes the
next one to the target. On a GPU a step of `n_batch` tokens takes milliseconds and the room
stays `n_batch`; on a CPU a long prompt is read in chunks of a fraction of a second, each one
more pass over the weights (the cost is in docs/benchmarks.md).

Seconds per token is measured over whole steps, fixed costs included: a step of n tokens that
took t seconds sets the next room to n * STEP_SECONDS / t, which settles where a full step
takes STEP_SECONDS. Steps the room did not limit (a few streams decoding their one token each)
say nothing about how long a full one takes, and are not counted.
"""

from __future__ import annotations

__all__ = ["Pace", "STEP_SECONDS"]

STEP_SECONDS = 0.15
_FIRST = 64  # the room before any step was measured: small on a CPU, gone in one step on a GPU
_LEAST = 16  # a long prompt always moves on, however slow the machine
_WEIGHT = 0.5  # of the latest step in the running seconds per token: depth changes it fast


class Pace:
    def __init__(self, most: int, target: float = STEP_SECONDS) -> None:
        self.most = most  # n_batch: what the llama.cpp batch holds
        self.target = target
        self._per_token: float | None = None

    def room(self) -> int:
        """Tokens the next step may carry."""
        if self._per_token is None:
            return min(self.most, _FIRST)
        fits = int(self.target / self._per_token) if self._per_token > 0 else self.most
        return max(min(self.most, _LEAST), min(self.most, fits))

    def took(self, tokens: int, seconds: float, *, full: bool) -> None:
        """A step of `tokens` took `seconds`; `full` when the room was what limited it."""
        if not full or tokens == 0:
            return
        latest = seconds / tokens
        if self._per_token is None:
            self._per_token = latest
        else:
            self._per_token += _WEIGHT * (latest - self._per_token)
