"""One request's generation, advanced by the decode thread one sampled token at a time.

The turn's logic reads top to bottom (free phase, then the forced-call rewind, then the
tail and usage) as a generator: it yields a `Feed` (the tokens its sequence must hold
before the next sample) and is sent the token sampled there. The scheduler (_slots.py)
batches every slot's feed into one decode per step, so the logic knows nothing of batches.
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from respond.engines._base import ChatTurn, Delta, Finish, TokenLogprob, ToolCallStart, Usage
from respond.engines._calls import RepeatGuard
from respond.engines.formats import StreamParser
from respond.engines.llamacpp._decoding import DecodingPlan
from respond.engines.llamacpp._logprobs import token_logprob, with_logprobs
from respond.engines.llamacpp._media import Image
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._sampler import SlotSampler

__all__ = ["CANCELLED", "Emit", "Feed", "Job"]

log = logging.getLogger("respond.engine")

CANCELLED = -1  # sent instead of a token when the turn's cancel flag is set


@dataclass(frozen=True)
class Feed:
    """What a sequence must hold before its next sample: `tokens` appended to what it
    holds, or (`fresh`) exactly `tokens`, reusing the longest prefix it already holds."""

    tokens: list[int]
    fresh: bool = False


Steps = Generator[Feed, int, None]
# Hands the stream a delta, the failure that ends it, or None: the end.
Emit = Callable[[Delta | BaseException | None], None]


class Job:
    def __init__(
        self,
        model: NativeModel,
        tokens: list[int],
        turn: ChatTurn,
        plan: DecodingPlan,
        emit: Emit,
        *,
        seed: int,
        n_ctx: int,
        images: Mapping[int, Image] | None = None,
    ) -> None:
        self.model = model
        self.tokens = tokens  # the prompt as the slot reads it (_respell.py may change it)
        # The images among the prompt's tokens, by the key of each image chunk (_media.py).
        self.images: Mapping[int, Image] = images or {}
        self.counted = len(tokens)  # the prompt as tokenized: what a count of it says
        self.turn = turn
        self.plan = plan
        self.emit = _unique_call_ids(emit, plan.new_call_id)
        self.seed = seed
        self.n_ctx = n_ctx
        self.cached: int | None = None  # prompt tokens reused from the slot (its first feed)
        self.slot = -1
        self.arrived = time.monotonic()
        self.waited = False  # for a slot to read a prefix it shares (logged once)
        self.sampler: SlotSampler | None = None
        self.logits: Any = None  # this step's logits, kept when logprobs are asked for
        self.written = ""  # the text the model wrote, markup included (for the debug log)
        self._steps = self._generate()

    # ------------------------------------------------------------ driven by the scheduler

    def start(self) -> Feed | None:
        return self._advance(lambda: next(self._steps))

    def step(self, index: int) -> Feed | None:
        """Sample at batch output `index`; the job's next feed, or None when it is done."""
        assert self.sampler is not None
        if self.turn.sampling.logprobs:
            self.logits = self.model.logits(index).copy()
        token = self.sampler.sample(index)
        return self._advance(lambda: self._steps.send(token))

    def cancel(self) -> Feed | None:
        return self._advance(lambda: self._steps.send(CANCELLED))

    def close(self) -> None:
        self._steps.close()
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None

    def _advance(self, resume: Callable[[], Feed]) -> Feed | None:
        try:
            return resume()
        except StopIteration:
            self.close()
            return None

    # ------------------------------------------------------------ the turn

    def _generate(self) -> Steps:
        plan, tokens = self.plan, self.tokens
        room = self.n_ctx - len(tokens)
        budget = _Budget(limit=min(self.turn.max_output_tokens or room, room))
        parser = plan.parser(stop_at_call=plan.call_grammar is not None)
        # Shared by both phases: a call that exactly repeats an earlier one ends the turn.
        guard = RepeatGuard()
        yield from self._phase(tokens, plan.grammar, parser, guard, budget)
        if parser.halted_at is not None and plan.call_grammar is not None:
            # The model chose to call a function: rewind to where its markup began and
            # write the call(s) under the grammar, so they are valid by construction.
            prefix = tokens + budget.rewind(self.model, parser.halted_at)
            self.written = self.written[: parser.halted_at]
            parser = plan.parser(stop_at_call=False, after_rewind=True)
            yield from self._phase(prefix, plan.call_grammar, parser, guard, budget)
        if not guard.repeated:
            unnamed = parser.unnamed_call
            tail = parser.close()
            for delta in guard.cut(tail, unnamed_call=unnamed) if budget.cut else guard.feed(tail):
                self.emit(delta)
        # A turn that ended on a repeat is complete, even if the limit cut that repeat.
        cut = budget.cut and not guard.repeated
        cached = self.cached or 0
        log.info(
            "generation %s after %d tokens (slot %d, prompt %d, cached %d, %.2fs)%s",
            "cancelled" if self.turn.cancel.is_set() else "cut" if cut else "ended",
            budget.produced,
            self.slot,
            len(tokens),
            cached,
            time.monotonic() - self.arrived,
            " on a repeated tool call" if guard.repeated else "",
        )
        log.debug("output, %d tokens:\n%s", budget.produced, self.written)
        self.emit(
            Usage(
                input_tokens=self.counted,
                output_tokens=budget.produced,
                cached_tokens=self._spared(cached),
                reasoning_tokens=budget.reasoning,
            )
        )
        self.emit(Finish("length" if cut else "stop"))

    def _spared(self, reused: int) -> int:
        """The counted prompt tokens the slot did not evaluate. Usage counts the prompt as
        tokenized, as a count of it says, also when the slot read it in tokens of its own
        (_respell.py: more or fewer); what it evaluated is what it did not spare."""
        return max(0, self.counted - (len(self.tokens) - reused))

    def _phase(
        self,
        tokens: list[int],
        grammar: str | None,
        parser: StreamParser,
        guard: RepeatGuard,
        budget: _Budget,
    ) -> Steps:
        """Sample until the end of the turn, the token limit, a cancel, an exact repeat of
        a call already made, or (when the parser is told to stop at a call) the start of a
        tool call."""
        sampling = self.turn.sampling
        if self.sampler is not None:
            self.sampler.close()
        self.sampler = SlotSampler(self.model, sampling, grammar, self.seed)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        feed = Feed(tokens, fresh=True)
        logprobs: tuple[TokenLogprob, ...] = ()  # of tokens whose text has not come yet
        while True:
            token = yield feed
            if token == CANCELLED or self.turn.cancel.is_set():
                break
            if self.model.is_end(token):
                budget.produced += 1  # the end-of-turn token was generated too
                break
            piece = self.model.detokenize([token], special=True)
            text = decoder.decode(piece)
            self.written += text
            thinking = parser.in_reasoning
            deltas = guard.feed(parser.feed(text))
            budget.took(token, text, reasoning=thinking or parser.in_reasoning)
            if self.logits is not None:
                top = sampling.top_logprobs
                logprobs += (token_logprob(self.model, token, piece, self.logits, top),)
            if text or not piece:
                deltas, logprobs = with_logprobs(deltas, logprobs), ()
            # else: the first bytes of a character the next token completes; its logprob
            # goes with that token's text, which the decoder holds back until then.
            for delta in deltas:
                self.emit(delta)
            if parser.halted_at is not None or guard.repeated:
                return
            if budget.exhausted:
                budget.cut = True
                break
            feed = Feed([token])
        rest = guard.feed(parser.feed(decoder.decode(b"", final=True)))
        for delta in with_logprobs(rest, logprobs):  # a character the limit cut: U+FFFD
            self.emit(delta)


def _unique_call_ids(emit: Emit, new_call_id: Callable[[], str]) -> Emit:
    """`emit`, with each call's id unique in the turn. Where the model writes the ids
    (Solar Open, Mistral's [CALL_ID]), the bundled model wrote the same one for two calls,
    and the client could not tell their outputs apart: a repeated id is replaced by one of
    respond's."""
    seen: set[str] = set()

    def unique(item: Delta | BaseException | None) -> None:
        if isinstance(item, ToolCallStart):
            if item.call_id in seen:
                log.info(
                    "call id %r written twice in one turn: the second is renamed", item.call_id
                )
                item = dataclasses.replace(item, call_id=new_call_id())
            seen.add(item.call_id)
        emit(item)

    return unique


@dataclass
class _Budget:
    """Output tokens of one turn, across the free and the constrained phases."""

    limit: int
    produced: int = 0
    reasoning: int = 0
    cut: bool = False
    kept: list[tuple[int, str]] = field(default_factory=list)  # (token, its text)

    @property
    def exhausted(self) -> bool:
        return self.produced >= self.limit

    def took(self, token: int, text: str, *, reasoning: bool) -> None:
        self.produced += 1
        self.reasoning += reasoning
        self.kept.append((token, text))

    def rewind(self, model: NativeModel, offset: int) -> list[int]:
        """Keep what was generated before text `offset`; return those tokens."""
        tokens: list[int] = []
        end = 0
        for token, text in self.kept:
            if end + len(text) > offset:
                break
            tokens.append(token)
            end += len(text)
        rest = "".join(text for _, text in self.kept)[end:offset]
        if rest:
            tokens += model.tokenize(rest.encode("utf-8"), add_bos=False, special=False)
        self.kept = []
        self.produced = len(tokens)
        return tokens
