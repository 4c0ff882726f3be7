"""FakeEngine: a FAKE engine driven by a JSON script of model output."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from respond.engines import (
    ChatTurn,
    Delta,
    Engine,
    Finish,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.engines.formats import HERMES, THINK_TAGS

__all__ = ["FakeEngine", "ScriptStep"]

ScriptStep = Mapping[str, Any]


class FakeEngine(Engine):
    """A FAKE engine driven by a script, for what a tiny real model can't produce on demand.

    Named as a fake on purpose: tests using it prove the HTTP stack, the event machinery and
    the output parsers, not a model. The script is a list of turns, one per request (the last
    one repeats); each turn is a list of steps, as JSON so a server subprocess can load it:

        {"raw": "<think>hm</think><tool_call>{...}</tool_call>"}  model text, run through the
                                          real stream parser (Hermes format, <think> on) in
                                          chunks of `chunk` characters, as tokens would arrive
        {"text": "..."} / {"reasoning": "..."} / {"call": "name", "arguments": "{...}"}
                                          deltas given directly
        {"finish": "length"}              how the turn ends (default "stop")

    Every turn it receives is kept in `turns` and, when `record` is set, appended to that
    file as one JSON line (messages with their roles, contents, tool calls and reasoning).
    """

    def __init__(
        self,
        script: Sequence[Sequence[ScriptStep]],
        *,
        name: str = "fake-model",
        chunk: int = 3,
        record: Path | None = None,
    ) -> None:
        if not script:
            raise ValueError("a FakeEngine script needs at least one turn")
        self.info = ModelInfo(id=name, owned_by="tests", context_window=None, backend="fake")
        self.script = [list(turn) for turn in script]
        self.chunk = chunk
        self.record = record
        self.turns: list[ChatTurn] = []
        self._ids = itertools.count()

    async def count_tokens(self, turn: ChatTurn) -> int:
        return sum(len(m.content.split()) + 1 for m in turn.messages)

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        index = len(self.turns)
        self.turns.append(turn)
        self._record(turn)
        steps = self.script[min(index, len(self.script) - 1)]
        produced = reasoning = 0
        finish: Any = "stop"
        for step in steps:
            if "finish" in step:
                finish = step["finish"]
                continue
            for delta in self._deltas(step):
                produced += 1
                reasoning += isinstance(delta, ReasoningDelta)
                yield delta
        yield Usage(
            input_tokens=await self.count_tokens(turn),
            output_tokens=produced,
            reasoning_tokens=reasoning,
        )
        yield Finish(finish)

    def _deltas(self, step: ScriptStep) -> Iterator[Delta]:
        if "raw" in step:
            parser = HERMES.parser(
                tools={},
                think=THINK_TAGS,
                in_reasoning=False,
                new_call_id=lambda: f"call_fake{next(self._ids)}",
                stop_at_call=False,
            )
            text = str(step["raw"])
            for start in range(0, len(text), self.chunk):
                yield from parser.feed(text[start : start + self.chunk])
            yield from parser.close()
        elif "text" in step:
            yield TextDelta(str(step["text"]))
        elif "reasoning" in step:
            yield ReasoningDelta(str(step["reasoning"]))
        elif "call" in step:
            yield ToolCallStart(call_id=f"call_fake{next(self._ids)}", name=str(step["call"]))
            yield ToolCallArgumentsDelta(str(step.get("arguments", "{}")))
            yield ToolCallEnd()
        else:
            raise ValueError(f"unknown script step: {step}")

    def _record(self, turn: ChatTurn) -> None:
        if self.record is None:
            return
        line = {
            "messages": [dataclasses.asdict(m) for m in turn.messages],
            "tools": [t.name for t in turn.tools],
            "tool_choice": dataclasses.asdict(turn.tool_choice),
            "reasoning_effort": turn.reasoning_effort,
        }
        with self.record.open("a") as handle:
            handle.write(json.dumps(line) + "\n")
