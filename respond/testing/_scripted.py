"""ScriptedEngine: a FAKE engine that replays scripted deltas."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Sequence

from respond.engines import ChatTurn, Delta, Engine, ModelInfo

__all__ = ["ScriptedEngine"]


class ScriptedEngine(Engine):
    """A FAKE engine that replays scripted deltas, for what a real model can't do on demand.

    Named as a fake on purpose: tests using it prove the HTTP stack and the event
    machinery, not a model. Each request takes the next script (an empty turn when none
    is left); an exception in a script is raised at that point, as a failing engine would::

        engine = ScriptedEngine([[TextDelta("hi"), Usage(1, 1), Finish("stop")]])
        app = respond.create_app(respond.assemble({engine.info.id: engine}))

    Every turn it is given is kept in `turns`, so a test can check what the engine saw.
    With `gate`, `load()` blocks until the event is set: a model that loads slowly.
    """

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
        self.delay = delay  # seconds before each step
        self._gate = gate
        self._loaded = gate is None

    def enqueue(self, *script: Delta | BaseException) -> None:
        """Add the script for a later request."""
        self.scripts.append(list(script))

    @property
    def ready(self) -> bool:
        return self._loaded

    def load(self) -> None:
        if self._gate is not None:
            self._gate.wait()
        self._loaded = True

    async def count_tokens(self, turn: ChatTurn) -> int:
        """One token per whitespace-separated word: a stand-in, not a tokenizer."""
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
