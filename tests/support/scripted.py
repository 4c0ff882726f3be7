"""A FAKE engine that replays scripted deltas, for cases a real model can't produce on demand.

Named as a fake on purpose: tests using it prove the HTTP stack and the event machinery,
not a model. Each request takes the next script; an Exception in a script is raised there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Sequence

from respond.engines._base import ChatTurn, Delta, Engine, ModelInfo


class ScriptedEngine(Engine):
    def __init__(
        self,
        scripts: Sequence[Sequence[Delta | BaseException]] = (),
        *,
        name: str = "fake-scripted",
        delay: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        self.info = ModelInfo(id=name, owned_by="tests", context_window=None, backend="fake")
        self.scripts = [list(script) for script in scripts]
        self.turns: list[ChatTurn] = []
        self.delay = delay
        self._gate = gate  # load() blocks until it is set: a model that loads slowly
        self._loaded = gate is None

    def enqueue(self, *script: Delta | BaseException) -> None:
        self.scripts.append(list(script))

    @property
    def ready(self) -> bool:
        return self._loaded

    def load(self) -> None:
        if self._gate is not None:
            self._gate.wait()
        self._loaded = True

    async def count_tokens(self, turn: ChatTurn) -> int:
        return sum(len(m.content.split()) for m in turn.messages)

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        self.turns.append(turn)
        script = self.scripts.pop(0) if self.scripts else []
        for step in script:
            if self.delay:
                await asyncio.sleep(self.delay)
            if turn.cancel.is_set():
                return
            if isinstance(step, BaseException):
                raise step
            yield step
