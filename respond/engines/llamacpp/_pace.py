"""How many tokens a shared decode step may carry: what the hardware reads in `STEP_SECONDS`.

A step that carries streams' tokens or a short prompt's beside a long prompt's chunk ends
only when the chunk is read: with `n_batch` (512) tokens, deep in an 8k-token prompt, about
a second on two CPU cores, so each stream's next token and a short request's first waited for
it (docs/benchmarks.md). The pace measures the seconds per token of the steps it limited and
sizes the next one to about STEP_SECONDS. On a GPU a step of `n_batch` tokens takes
milliseconds and the room stays `n_batch`. On a CPU the room never falls below `_LEAST`: each
step costs a fixed pass over the graph (about 0.1 s for the bundled model on one thread,
measured: 1,024 tokens took 13.9 s in steps of 16, 9.4 s in steps of 64, 8.7 s in steps of
256), so smaller steps would cost the long prompt more than they spare the others.
A prompt read alone is not paced: it gets `n_batch`, and a request that arrives stops its
step (_preempt.py).

Seconds per token is measured over whole steps, fixed costs included: a step of n tokens that
took t seconds sets the next room to n * STEP_SECONDS / t, which settles where a full step
takes STEP_SECONDS. Steps the room did not limit (a few streams decoding their one token each)
say nothing about how long a full one takes, and are not counted.
"""

from __future__ import annotations

__all__ = ["STEP_SECONDS", "Pace", "beside_a_long_prompt"]

STEP_SECONDS = 0.15
_FIRST = 64  # the room before any step was measured: small on a CPU, gone in one step on a GPU
_LEAST = 64  # the fixed cost of a step stays a small part of it (above)
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


def beside_a_long_prompt(pending: list[int], most: int) -> bool:
    """Whether a shared step is paced: some prompt has more left than one batch holds, the
    chunk that would keep the others waiting. Prompts of a few hundred tokens (agents' turns,
    their history restored) fill whole batches: paced into small steps they lost a third of
    their turns per second (docs/benchmarks.md, 0.56 against 0.85 at 16 sessions)."""
    return any(n > most for n in pending)
