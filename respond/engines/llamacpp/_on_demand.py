"""Models loaded when asked: a folder of GGUFs (`--models-dir`), at most `--models-max` of them
resident, as llama-server's router and Ollama serve theirs.

Every model of the folder is served from the start (an `OnDemandEngine` each: /v1/models lists
them with their state), and its embedded engine is built and loaded by the first request that
names it; requests that arrive meanwhile wait for that one load. A model is *held* from the
first call a turn makes on it (counting its tokens) to the end of its stream: its vocabulary is
in the turn's grammar by then, so it must not go away. When a load needs room, the least
recently used model that no turn holds is unloaded (its weights, context and decode thread
freed); models idle longer than `--models-ttl` are unloaded too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from respond.engines._base import (
    ChatTurn,
    Delta,
    Engine,
    EngineError,
    LoadReport,
    ModelInfo,
    UnsupportedSchemaError,
)
from respond.engines.llamacpp._engine import LlamaCppEngine
from respond.engines.llamacpp._grammar import unsupported_keyword

__all__ = ["OnDemandEngine", "Shelf", "gguf_models", "mmproj_beside"]

log = logging.getLogger("respond.engine")

State = Literal["unloaded", "loading", "loaded"]
_WAIT_S = 0.1  # how often a load waiting for room looks again


def gguf_models(folder: Path) -> list[Path]:
    """The chat models of a folder: every *.gguf but multimodal projectors (mmproj*)."""
    found = sorted(p for p in folder.glob("*.gguf") if p.is_file())
    return [p for p in found if not p.name.lower().startswith("mmproj")]


def mmproj_beside(model: Path) -> Path | None:
    """The projector of a model of the folder: the first mmproj*.gguf (by name) whose name
    holds the model's up to its last `-`, where the quant is (`gemma-3-4b-it-Q4_K_M.gguf`:
    `mmproj-gemma-3-4b-it-F16.gguf`)."""
    stem = model.stem.lower()
    base = stem.rsplit("-", 1)[0] if "-" in stem else stem
    found = sorted(
        p
        for p in model.parent.glob("*.gguf")
        if p.name.lower().startswith("mmproj") and base in p.stem.lower()
    )
    return found[0] if found else None


class Shelf:
    """The models that may be resident at once, and the idle sweep."""

    def __init__(self, max_loaded: int, idle_seconds: float) -> None:
        self.max_loaded = max_loaded
        self.idle_seconds = idle_seconds  # 0: never unloaded for idleness
        self.engines: list[OnDemandEngine] = []
        self._room = asyncio.Lock()  # one load makes room at a time
        self._sweeper: asyncio.Future[None] | None = None

    async def make_room(self, coming: OnDemandEngine) -> None:
        """Unload least recently used idle models until `coming` fits; wait while every
        resident model is held."""
        async with self._room:
            while True:
                resident = [e for e in self.engines if e is not coming and e.state != "unloaded"]
                if len(resident) < self.max_loaded:
                    break
                idle = [e for e in resident if e.state == "loaded" and not e.held]
                if idle:
                    await min(idle, key=lambda e: e.last_used).unload("to make room")
                else:
                    await asyncio.sleep(_WAIT_S)
        self._sweep_later()

    def _sweep_later(self) -> None:
        if self.idle_seconds and self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep_forever())

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(max(0.5, min(self.idle_seconds / 4, 30.0)))
            now = time.monotonic()
            for engine in self.engines:
                idle = now - engine.last_used >= self.idle_seconds
                if engine.state == "loaded" and not engine.held and idle:
                    async with self._room:
                        await engine.unload(f"idle for {self.idle_seconds:g}s")

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper


class OnDemandEngine(Engine):
    """One model of the folder: an embedded engine built and loaded on first use."""

    def __init__(
        self,
        path: Path,
        alias: str,
        *,
        n_ctx: int,
        build: Callable[[], LlamaCppEngine],
        shelf: Shelf,
        vision: bool = False,
    ) -> None:
        self.path = path
        self._build = build
        self.shelf = shelf
        shelf.engines.append(self)
        self._info = ModelInfo(
            id=alias,
            owned_by="respond",
            context_window=n_ctx,
            backend="llama.cpp",
            vision=vision,  # an mmproj beside it
            image_bytes=True,
        )
        self._inner: LlamaCppEngine | None = None
        self._loading = asyncio.Lock()
        self.state: State = "unloaded"
        self.last_used = 0.0
        self._holds: dict[int, weakref.finalize[Any, Any]] = {}

    @property
    def info(self) -> ModelInfo:  # type: ignore[override]
        """What the loaded engine says (format, placement) while it is loaded, and the state."""
        base = self._inner.info if self._inner is not None else self._info
        return dataclasses.replace(base, state=self.state)

    @property
    def held(self) -> bool:
        return bool(self._holds)

    # ------------------------------------------------------------ holding and loading

    async def _take(self, turn: ChatTurn) -> LlamaCppEngine:
        """The loaded engine, held for `turn` until its stream ends (or the turn is gone)."""
        key = id(turn)
        if key not in self._holds:  # held before the load, so no other load evicts it
            self._holds[key] = weakref.finalize(turn, self._holds.pop, key, None)
        self.last_used = time.monotonic()
        try:
            return await self.load_now()
        except BaseException:
            self._release(turn)
            raise

    def _release(self, turn: ChatTurn) -> None:
        hold = self._holds.pop(id(turn), None)
        if hold is not None:
            hold.detach()
        self.last_used = time.monotonic()

    async def load_now(self) -> LlamaCppEngine:
        """Load the model if it is not (requests arriving meanwhile wait for this load)."""
        async with self._loading:
            if self._inner is not None:
                return self._inner
            await self.shelf.make_room(self)
            self.state = "loading"
            started = time.monotonic()
            engine = self._build()
            await asyncio.to_thread(engine.load)
            if engine.load_error is not None:
                self.state = "unloaded"
                raise EngineError(
                    f"The model '{self._info.id}' could not be loaded from {self.path}: "
                    f"{engine.load_error}",
                    code="model_load_failed",
                    status=503,
                )
            self._inner, self.state = engine, "loaded"
            log.info("'%s' loaded on demand in %.1fs", self._info.id, time.monotonic() - started)
            return engine

    async def unload(self, why: str) -> bool:
        """Free the model unless a turn holds it; False when one does."""
        async with self._loading:
            engine = self._inner
            if engine is None or self.held:
                return engine is None
            self._inner, self.state = None, "unloaded"
            await asyncio.to_thread(engine.unload)
            log.info("'%s' unloaded (%s)", self._info.id, why)
            return True

    # ------------------------------------------------------------ the engine

    async def count_tokens(self, turn: ChatTurn) -> int:
        return await (await self._take(turn)).count_tokens(turn)

    async def prepare(self, turn: ChatTurn) -> None:
        await (await self._take(turn)).prepare(turn)

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        engine = await self._take(turn)
        try:
            async for delta in engine.stream(turn):
                yield delta
        finally:
            self._release(turn)

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        found = unsupported_keyword(schema)  # what any embedded model enforces
        if found is not None:
            raise UnsupportedSchemaError(*found)

    def load_report(self) -> LoadReport | None:
        return self._inner.load_report() if self._inner is not None else None

    async def health(self) -> list[dict[str, Any]] | None:
        return await self._inner.health() if self._inner is not None else None

    async def aclose(self) -> None:
        await self.shelf.aclose()
        if self._inner is not None:
            engine, self._inner = self._inner, None
            await asyncio.to_thread(engine.unload)
