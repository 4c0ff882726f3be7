"""The scheduler: continuous batching of every slot in one llama.cpp context.

One decode thread loops: it gives waiting jobs the free slots (arrival order), then builds
one batch from every busy slot (a decoding slot's one token first, then prompt chunks up
to the step's room in all, the prompt with the fewest tokens left to read first, so a long
prompt is read over several steps while the other streams go on and a short prompt that
arrives meanwhile is read at the next step), decodes it, and samples each slot whose feed
is complete. A job that arrives joins at the next step; one that ends frees its slot without
stalling the rest. A prompt read alone gets `n_batch` tokens a step, and a request that
arrives stops that step (_preempt.py: llama.cpp drops what it wrote, the chunk is read again
after the newcomer's first step); beside other work, a step carries what the hardware reads
in a fraction of a second (_pace.py). So a short request waits for neither a long step in
progress nor a long chunk in its own.

A job goes to the free slot whose last prompt its own prompt continues (the next turn of
that conversation, or the same prompt again), the longest such; else to a slot never used,
else to the least recently used one (its conversation is the one evicted). Whatever prefix
the chosen slot shares with the prompt is reused either way. When another slot, busy or
not, holds a longer prefix (a system prompt that conversations share, the same prompt sent
by several clients at once), its cells are copied into the chosen slot first, if that
spares enough prompt tokens to be worth a copy of a whole sequence (`copy_worth`). A prompt
that a busy slot is still reading a long enough prefix of (sessions that start at once with
the same system prompt) waits for that slot to have read it, then copies it: the shared part
is read once, not once by each of them side by side. Then the part of the prompt whose text
the slot holds is spelled with the slot's own tokens (_respell.py: a model's output, read
back in the next turn, tokenizes otherwise).

With more conversations than slots, the cells a slot is about to lose (more than
`copy_worth` tokens of them) are first saved in the prompt cache beyond the slots
(_cache.py, host RAM, `--cache-ram`), and a prompt that a saved state continues further than
any slot does has that state restored into its slot instead of being evaluated again.

An image in a prompt (a model with a projector, _media.py) stands in the token lists as its
placeholders: a slot whose next pending tokens are an image's has it encoded and decoded into
its sequence on its own, before the step's text batch, which never holds a placeholder.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import llama_cpp

from respond.engines.llamacpp._cache import PromptCache
from respond.engines.llamacpp._job import Feed, Job
from respond.engines.llamacpp._media import Media, image_key, image_positions
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._native import big_stack_thread
from respond.engines.llamacpp._pace import Pace, beside_a_long_prompt
from respond.engines.llamacpp._preempt import ABORTED
from respond.engines.llamacpp._respell import TokenText, respell
from respond.engines.llamacpp._slot import Slot, common_prefix

__all__ = ["Scheduler", "copy_worth", "fill_batch"]

log = logging.getLogger("respond.engine")

_SMOOTHING = 0.2  # weight of the latest job in the average job time (Retry-After)
_MIB = 1024 * 1024
# How long a thread waiting for the GIL lets the holder run before asking for it (Python's
# default is 5 ms). The decode thread gives the GIL up for every llama_decode and needs it
# back the moment the step ends, while the event loop thread streams the last token: at the
# default, one stream measured 2-5% slower than at this (bench_concurrency, docs/benchmarks.md).
_SWITCH_SECONDS = 0.0005
# The fewest tokens of a step alone worth stopping for a request: a shorter one ends soon.
_STOPPABLE = 64


class Scheduler:
    def __init__(
        self,
        model: NativeModel,
        *,
        n_slots: int,
        queue_max: int,
        cache: PromptCache,
        media: Media | None = None,
    ) -> None:
        self.model = model
        self.media = media  # the projector, for the prompts' images
        self.slots = [Slot(seq) for seq in range(n_slots)]
        self.queue_max = queue_max
        self.cache = cache  # touched by the decode thread only; /metrics reads its counts
        self._waiting: deque[Job] = deque()
        self._wake = threading.Condition()
        self._batch: Any = llama_cpp.llama_batch_init(model.n_batch, 0, 1)
        self._in_batch: list[Slot] = []  # the slots in the batch being decoded
        self._pace = Pace(model.n_batch)  # tokens a step may carry (_pace.py)
        self._room = 0  # the room of the batch being decoded
        self._stoppable = False  # the batch is one prompt's chunk alone (_preempt.py)
        # Jobs submitted, and as many as the last admission saw: only a newer one stops a
        # step (one put back to wait for a slot or a reader must not stop every step).
        self._submitted = 0
        self._seen = 0
        self._job_seconds = 1.0  # a running average, for Retry-After
        self._text = TokenText(model.vocab)
        self._stopping = False
        sys.setswitchinterval(min(sys.getswitchinterval(), _SWITCH_SECONDS))
        # A big stack: samplers parse their grammars in this thread (_native.py).
        self._thread = big_stack_thread(self._run, (), "respond-decode")

    # ------------------------------------------------------------ any thread

    def submit(self, job: Job) -> None:
        with self._wake:
            self._waiting.append(job)
            self._submitted += 1
            self._wake.notify()
        self.model.preempt.request()  # a long prompt's step alone stops for it

    @property
    def busy(self) -> int:
        return sum(slot.job is not None for slot in self.slots)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def full(self) -> bool:
        """Every slot busy and the queue at its limit: a new request would only wait."""
        return self.busy >= len(self.slots) and self.queued >= self.queue_max

    def retry_after(self) -> int:
        """Seconds until a slot is likely free for one more request."""
        rounds = (self.queued + 1) / len(self.slots)
        return max(1, min(600, math.ceil(self._job_seconds * rounds)))

    # ------------------------------------------------------------ the decode thread

    def stop(self) -> None:
        """End the decode thread once no job is left (a model being unloaded: the caller
        sends no more), and free the batch; the model is the caller's to close."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()
        llama_cpp.llama_batch_free(self._batch)

    def _run(self) -> None:
        while True:
            try:
                arrivals, gone = self._arrivals()
            except _Stopped:
                return
            try:
                for job in gone:
                    self._end_unstarted(job)
                self._wait_again(self._admit(arrivals))
                self._step()
            except Exception:  # a bug: log it, keep serving the other slots
                log.exception("the decode loop failed a step")

    def _arrivals(self) -> tuple[list[Job], list[Job]]:
        """Waiting jobs for the free slots, and those cancelled while they waited (their
        client left: they must not hold a place in the queue). Blocks while idle."""
        with self._wake:
            while not self._waiting and not any(slot.job for slot in self.slots):
                if self._stopping:
                    raise _Stopped
                self._wake.wait()
            gone = [job for job in self._waiting if job.turn.cancel.is_set()]
            for job in gone:
                self._waiting.remove(job)
            free = sum(slot.job is None for slot in self.slots)
            arrivals = [self._waiting.popleft() for _ in range(min(free, len(self._waiting)))]
            self._seen = self._submitted
            return arrivals, gone

    def _wait_again(self, jobs: list[Job]) -> None:
        """Put jobs back at the head of the queue, in their order."""
        if not jobs:
            return  # the usual step: no lock taken for nothing
        with self._wake:
            self._waiting.extendleft(reversed(jobs))

    def _end_unstarted(self, job: Job) -> None:
        """End a job that never had a slot as a cancelled turn (its Usage and Finish)."""
        try:
            if job.start() is not None:
                job.cancel()
        except Exception as exc:
            job.emit(exc)
        job.close()
        job.emit(None)

    def _admit(self, jobs: Iterable[Job]) -> list[Job]:
        """Give each job a slot; returns those that wait for a slot to read their prefix."""
        worth = copy_worth(self.model.n_ctx_seq)
        later: list[Job] = []
        for job in jobs:
            if self._awaits_reader(job, worth):
                later.append(job)
                continue
            # A slot continues a conversation when the prompt, spelled with the slot's own
            # tokens, starts with its last prompt: compared as tokenized afresh, a reply the
            # model wrote in other tokens hid that the conversation was there.
            spell = self._spelling(job)
            slot = self._place(job, spell)
            # Saved before anything overwrites the slot, kept after a restore: the room it
            # needs is taken from entries other than the one restored.
            leaving = self._leaving(slot, job.tokens, worth)
            if self._restore(slot, job.tokens, worth):
                job.tokens = spell(slot)  # the cells it holds now
            else:
                source = _source(self.slots, slot, job.tokens, worth)
                if source is not None:
                    slot.copy_from(source, self.model)
                    job.tokens = spell(slot)  # the cells it holds now
            if leaving is not None:
                self._keep(slot.seq, *leaving)
            slot.job = job
            slot.prompt_len = len(job.tokens)
            job.slot = slot.seq
            self._advance(slot, job.start)
        return later

    def _awaits_reader(self, job: Job, worth: int) -> bool:
        """Whether a busy slot is still reading a prefix of this prompt that spares `worth`
        tokens more than the slots or the prompt cache hold: the job then waits for it and
        copies its cells (a wait no longer than reading those tokens itself would take)."""
        tokens = job.tokens
        reader = _reader(self.slots, tokens, worth)
        if reader is None:
            return False
        found = self.cache.find(tokens) if self.cache.enabled else None
        if found is not None and _reader(self.slots, tokens, worth, found[1]) is None:
            return False
        if not job.waited:
            job.waited = True
            log.info(
                "a prompt of %d tokens waits for slot %d to read the prefix they share",
                len(tokens),
                reader.seq,
            )
        return True

    def _place(self, job: Job, spell: Callable[[Slot], list[int]]) -> Slot:
        """The free slot for the job, its prompt set as that slot spells it (each free
        slot's spelling is computed once, for the choice and for the prompt)."""
        free = [s for s in self.slots if s.job is None]
        spellings = {s.seq: spell(s) for s in free}
        slot = _choose(free, lambda s: spellings[s.seq])
        job.tokens = spellings[slot.seq]
        return slot

    def _leaving(self, slot: Slot, tokens: list[int], worth: int) -> tuple[list[int], Any] | None:
        """The tokens and saved cells of what `slot` holds and this prompt would drop, when
        that is `worth` tokens or more and the prompt cache does not hold it already."""
        cache = self.cache
        lost = len(slot.held) - common_prefix(slot.held, tokens)
        if not cache.enabled or slot.copying or lost < worth or cache.holds(slot.held):
            return None
        state = self.model.save(slot.seq)
        if state is None:
            log.warning("prompt cache: llama.cpp could not save slot %d's cells", slot.seq)
            return None
        return list(slot.held), state

    def _keep(self, seq: int, tokens: list[int], state: Any) -> None:
        cache = self.cache
        if cache.keep(tokens, state, len(state)):
            log.debug(
                "prompt cache: saved slot %d's %d tokens (%.1f MiB; %d entries, %.0f of %.0f MiB)",
                seq,
                len(tokens),
                len(state) / _MIB,
                len(cache),
                cache.held / _MIB,
                cache.limit / _MIB,
            )

    def _restore(self, slot: Slot, tokens: list[int], worth: int) -> bool:
        """Restore into `slot` the saved state with the longest prefix of this prompt, when
        it spares `worth` tokens more than any slot holds (the slot's own cells, or another
        slot's to copy). Only a prompt the slots leave `worth` tokens of is looked up: a
        hit, a miss, or a failed restore (the prompt is then evaluated)."""
        cache = self.cache
        held = max(s.reuse(tokens) for s in self.slots if s is slot or s.held)
        if not cache.enabled or len(tokens) - 1 - held < worth:
            return False
        found = cache.find(tokens)
        spared = min(found[1], len(tokens) - 1) if found else 0
        if found is None or spared - held < worth or slot.copying:
            cache.misses += 1
            log.info(
                "prompt cache: miss for a prompt of %d tokens (the slots hold %d of them, "
                "the cache %d)",
                len(tokens),
                held,
                spared,
            )
            return False
        entry = found[0]
        started = time.monotonic()
        if not slot.restore(entry.tokens, entry.state, self.model):
            cache.failures += 1
            cache.drop(entry)
            log.warning("prompt cache: slot %d could not restore a saved state", slot.seq)
            return False
        cache.used(entry, spared)
        log.info(
            "prompt cache: restored %d tokens of a prompt of %d into slot %d (%.1f MiB in %.0f ms)",
            spared,
            len(tokens),
            slot.seq,
            entry.size / _MIB,
            (time.monotonic() - started) * 1000,
        )
        return True

    def _spelling(self, job: Job) -> Callable[[Slot], list[int]]:
        """The job's prompt as a slot would read it: spelled with the slot's tokens where
        the slot holds its text."""

        def plain(text: bytes) -> list[int]:
            return self.model.tokenize(text, add_bos=False, special=False)

        def spelled(slot: Slot) -> list[int]:
            tokens = respell(slot.held, job.tokens, self._text, plain)
            return tokens if len(tokens) < job.n_ctx else job.tokens  # it must still fit

        return spelled

    def _step(self) -> None:
        for slot in self.slots:
            job = slot.job
            if job is not None and job.turn.cancel.is_set():
                self._advance(slot, job.cancel)
        for slot in self.slots:
            if slot.job is not None and slot.feed is not None:
                reused = slot.apply(slot.feed, self.model)
                if slot.job.cached is None:
                    slot.job.cached = reused
                slot.feed = None
        for slot in self.slots:
            if slot.job is not None and slot.pending and slot.pending[0] < 0:
                self._image(slot)
        outputs = self._fill()
        if self._decode():
            for slot, index in outputs:
                job = slot.job
                assert job is not None
                self._advance(slot, lambda job=job, index=index: job.step(index))

    def _image(self, slot: Slot) -> None:
        """Decode the image chunk that starts the slot's pending tokens into its sequence."""
        job = slot.job
        assert job is not None
        key = image_key(slot.pending[0])
        image = job.images.get(key) if key is not None else None
        n = _placeholders(slot.pending)
        started = time.monotonic()
        status = -1  # a prompt cut inside an image: never made so (whole_images)
        if key is not None and image is not None and self.media is not None:
            status = self.media.decode(
                image.chunks[key],
                self.model.ctx,
                seq=slot.seq,
                n_past=slot.position,
                n_batch=self.model.n_batch,
            )
        if key is None or status != 0:
            self._fail(slot, RuntimeError(f"llama.cpp could not decode an image ({status})"))
            slot.forget(self.model)
            return
        for other in self.slots:  # llama.cpp did every pending copy before the image
            other.copying = False
        log.info(
            "slot %d: an image of %d tokens decoded in %.0f ms",
            slot.seq,
            n,
            (time.monotonic() - started) * 1000,
        )
        slot.held += slot.pending[:n]
        del slot.pending[:n]
        slot.shift += n - image_positions(key)

    def _fill(self) -> list[tuple[Slot, int]]:
        """Fill the batch. One prompt being read alone gets the whole batch, in a step that a
        request arriving stops (_preempt.py); beside a long prompt's chunk a step carries what
        the hardware reads in a fraction of a second (_pace.py), every stream's token always."""
        busy = [s for s in self.slots if s.job is not None and s.pending]
        streams = sum(1 for s in busy if len(s.pending) == 1)
        # Stopped only where the newcomer can start at once: a slot free for it, no copy
        # of cells under way (llama.cpp makes it at the step's start).
        alone = len(busy) == 1 and any(s.job is None for s in self.slots)
        alone = alone and not any(s.copying for s in self.slots)
        paced = not alone and beside_a_long_prompt(
            [len(s.pending) for s in busy], self.model.n_batch
        )
        room = max(self._pace.room(), streams) if paced else self.model.n_batch
        self._room = min(self.model.n_batch, room)
        outputs, self._in_batch = fill_batch(self._batch, self.slots, self._room)
        self._stoppable = alone and self._batch.n_tokens >= _STOPPABLE
        return outputs

    def _decode(self) -> bool:
        tokens = self._batch.n_tokens
        if tokens == 0:
            return False
        started = time.perf_counter()
        status = self._run_batch()
        if status == 0:
            seconds = time.perf_counter() - started
            self._pace.took(tokens, seconds, full=tokens >= self._room)
            for slot in self.slots:  # llama.cpp did every pending copy before the batch
                slot.copying = False
            return True
        if status == ABORTED and self._stoppable:
            (slot,) = self._in_batch  # llama.cpp dropped the chunk's cells: read it again
            slot.pending[:0] = slot.held[-tokens:]
            del slot.held[-tokens:]
            log.debug("slot %d: a step of %d tokens stopped for a request", slot.seq, tokens)
            return False
        failure = RuntimeError(f"llama_decode failed with status {status}")
        for slot in self._in_batch:
            self._fail(slot, failure)
            slot.forget(self.model)
        return False

    def _run_batch(self) -> int:
        if not self._stoppable:
            return self.model.decode(self._batch)
        with self._wake:  # a job that came since the last admission stops it at once
            self.model.preempt.arm(now=self._submitted != self._seen)
        try:
            return self.model.decode(self._batch)
        finally:
            self.model.preempt.disarm()

    def _advance(self, slot: Slot, resume: Any) -> None:
        """Run the job's logic to its next feed; free the slot when it is done."""
        job = slot.job
        assert job is not None
        try:
            feed: Feed | None = resume()
        except Exception as exc:
            self._fail(slot, exc)
            return
        if feed is None:
            self._release(slot)
        else:
            slot.feed = feed

    def _fail(self, slot: Slot, exc: BaseException) -> None:
        job = slot.job
        if job is None:
            return
        log.error("generation failed on slot %d: %s", slot.seq, exc)
        with contextlib.suppress(Exception):
            job.close()
        with contextlib.suppress(Exception):
            job.emit(exc)  # the stream raises it as an EngineError
        self._release(slot)

    def _release(self, slot: Slot) -> None:
        job = slot.job
        assert job is not None
        seconds = time.monotonic() - job.arrived
        self._job_seconds += _SMOOTHING * (seconds - self._job_seconds)
        with contextlib.suppress(Exception):
            job.emit(None)  # the end of the stream
        slot.job = None
        slot.feed = None
        slot.pending.clear()
        slot.used_at = time.monotonic()


def fill_batch(
    batch: Any, slots: list[Slot], room: int
) -> tuple[list[tuple[Slot, int]], list[Slot]]:
    """Put every busy slot's pending tokens in `batch`, up to `room` tokens, decoding slots
    first, then prompt chunks, the fewest tokens left to read first (in arrival order among
    equals). Returns (slot, batch index) for each slot to sample after the decode, and the
    slots in the batch.

    Fewest first: in arrival order, a short request that came just after an 8k-token prompt
    waited for the whole of it to be read (minutes on a CPU) before its first token; read
    first, it waits at most one step, and the long prompt loses only the few tokens it gave.

    The batch lists the slots by sequence id: llama.cpp decodes the sequences of a
    non-unified cache in one pass only while their ids increase by one, and splits the
    batch wherever they do not (`llama_batch_allocr::split_equal`), each part a whole pass
    over the weights. Listed by arrival, 8 streams took up to 8 passes a step.
    """
    chunks: list[tuple[Slot, list[int]]] = []
    busy = [s for s in slots if s.job is not None and s.pending]
    busy.sort(key=lambda s: (len(s.pending), s.job.arrived if s.job else 0.0))
    for slot in busy:
        if room == 0:
            break
        text = slot.pending[:room]
        text = text[: _text_run(text)]
        if text:  # else an image comes first: decoded on its own (Scheduler._image)
            chunks.append((slot, text))
            room -= len(text)
    chunks.sort(key=lambda chunk: chunk[0].seq)
    batch.n_tokens = 0
    outputs: list[tuple[Slot, int]] = []
    for slot, chunk in chunks:
        start = slot.position
        for offset, token in enumerate(chunk):
            at = batch.n_tokens
            batch.token[at] = token
            batch.pos[at] = start + offset
            batch.n_seq_id[at] = 1
            batch.seq_id[at][0] = slot.seq
            batch.logits[at] = False
            batch.n_tokens += 1
        slot.held += chunk
        del slot.pending[: len(chunk)]
        if not slot.pending:
            batch.logits[batch.n_tokens - 1] = True
            outputs.append((slot, batch.n_tokens - 1))
    return outputs, [slot for slot, _ in chunks]


def _text_run(tokens: list[int]) -> int:
    """How many tokens come before the first image placeholder (all of them, if none)."""
    return next((i for i, token in enumerate(tokens) if token < 0), len(tokens))


def _placeholders(tokens: list[int]) -> int:
    """The length of the image chunk that starts `tokens`: its placeholders, up to the next
    chunk's first one or the next text token."""
    n = 1
    while n < len(tokens) and tokens[n] < 0 and image_key(tokens[n]) is None:
        n += 1
    return n


class _Stopped(Exception):
    """The scheduler was stopped and has nothing left to run."""


def copy_worth(n_ctx_seq: int) -> int:
    """The fewest prompt tokens a copy must spare. llama.cpp copies a sequence's whole cache
    (for the bundled model 17 ms at 4,096 cells a sequence, 68 ms at 16,384, on 2 cores
    that evaluate a prompt token in ~5 ms), so the bar grows with the sequence size."""
    return max(16, n_ctx_seq // 128)


def _source(slots: list[Slot], chosen: Slot, tokens: list[int], worth: int) -> Slot | None:
    """The slot whose cells to copy into `chosen` for this prompt, if any spares `worth`."""
    others = [s for s in slots if s is not chosen and s.held]
    if not others:
        return None
    best = max(others, key=lambda s: s.reuse(tokens))
    return best if best.reuse(tokens) - chosen.reuse(tokens) >= worth else None


def _reader(slots: list[Slot], tokens: list[int], worth: int, cached: int = 0) -> Slot | None:
    """A busy slot whose prompt shares `worth` tokens more with `tokens` than any slot holds
    (or `cached`, what the prompt cache would restore), and which has not read them yet."""
    held = max([cached, *(s.reuse(tokens) for s in slots)])
    for slot in slots:
        if slot.job is None:
            continue
        shared = min(common_prefix(slot.job.tokens, tokens), len(tokens) - 1)
        if len(slot.held) < shared and shared - held >= worth:
            return slot
    return None


def _choose(free: list[Slot], spelled: Callable[[Slot], list[int]]) -> Slot:
    """The free slot for a prompt, given as each slot would spell it: see the module's
    docstring."""
    continued = [s for s in free if s.continues(spelled(s))]
    if continued:
        return max(continued, key=lambda s: s.prompt_len)
    # Never used slots have used_at 0: they go first.
    return min(free, key=lambda s: s.used_at)
