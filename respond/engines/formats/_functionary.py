"""Functionary v3.2: each message of the turn is `>>>RECIPIENT\\n` and its text.

    >>>all\\nLet me look.>>>get_weather\\n{"city": "Paris"}>>>get_weather\\n{"city": "Rome"}

`all` is the user: its text is the answer; any other recipient is a function, the message
its JSON arguments. The generation prompt ends with the first `>>>`, so the model's text
begins with a recipient: `render` and the grammar start there (the grammar at a function's
name), and the parser starts reading a recipient. The family has no reasoning markup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from respond.engines._base import (
    Delta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
)
from respond.engines.formats._stream import JsonScanner, partial_suffix

__all__ = ["FUNCTIONARY_V32"]

SEP = ">>>"
USER = "all\n"  # the recipient of the answer


class FunctionaryParser:
    """Raw model text in, deltas out, from just after the prompt's `>>>`."""

    def __init__(self, options: ParseOptions) -> None:
        self._tools = options.tools
        self._new_call_id = options.new_call_id
        self._stop_at_call = options.stop_at_call
        self.in_reasoning = False
        self.halted_at: int | None = None
        self._fed = 0
        self._buffer = ""
        self._state: Literal["recipient", "text", "json", "after_call"] = "recipient"
        self._scanner = JsonScanner()

    def feed(self, chunk: str) -> list[Delta]:
        if self.halted_at is not None:
            return []
        self._fed += len(chunk)
        self._buffer += chunk
        return self._run(final=False)

    def close(self) -> list[Delta]:
        if self.halted_at is not None:
            return []
        out = self._run(final=True)
        if self._state == "json":
            out.append(ToolCallEnd(at_end=True))  # the call ends with generation
        elif self._state == "recipient" and self.unnamed_call:
            pass  # a function's name cut short: neither call nor text
        elif self._buffer:
            out.append(TextDelta(self._buffer))
        self._buffer = ""
        return out

    @property
    def unnamed_call(self) -> bool:
        held = self._buffer
        return (
            self._state == "recipient"
            and self._tools is not None
            and bool(held)
            and not USER.startswith(held)
            and self.halted_at is None
        )

    def _run(self, *, final: bool) -> list[Delta]:
        out: list[Delta] = []
        while True:
            before = (self._state, len(self._buffer))
            out += getattr(self, f"_on_{self._state}")(final)
            if (self._state, len(self._buffer)) == before or self.halted_at is not None:
                return out

    def _on_recipient(self, final: bool) -> list[Delta]:
        if self._buffer.startswith(USER):
            self._buffer = self._buffer[len(USER) :]
            self._state = "text"
            return []
        if USER.startswith(self._buffer) and not final:
            return []  # maybe the answer's recipient, still arriving
        if self._tools is None:  # without tools a recipient is the model's text
            self._state = "text"
            return []
        if self._stop_at_call:
            self.halted_at = self._fed - len(self._buffer)
            self._buffer = ""
            return []
        end = self._buffer.find("\n")
        if end < 0:
            return []
        name, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
        self._state = "json"
        self._scanner = JsonScanner()
        return [ToolCallStart(call_id=self._new_call_id(), name=name.strip())]

    def _on_text(self, final: bool) -> list[Delta]:
        at = self._buffer.find(SEP)
        if at >= 0:
            text, self._buffer = self._buffer[:at], self._buffer[at + len(SEP) :]
            self._state = "recipient"
        else:
            keep = 0 if final else partial_suffix(self._buffer, (SEP,))
            text = self._buffer[: len(self._buffer) - keep]
            self._buffer = self._buffer[len(text) :]
        return [TextDelta(text)] if text else []

    def _on_json(self, final: bool) -> list[Delta]:
        take = 0
        for char in self._buffer:
            if self._scanner.done or self._scanner.ends_scalar(char):
                self._scanner.done = True
                break
            self._scanner.push(char)
            take += 1
        text, self._buffer = self._buffer[:take], self._buffer[take:]
        out: list[Delta] = [ToolCallArgumentsDelta(text)] if text else []
        if self._scanner.done:
            out.append(ToolCallEnd())
            self._state = "after_call"
        return out

    def _on_after_call(self, final: bool) -> list[Delta]:
        if self._buffer.startswith(SEP):
            self._buffer = self._buffer[len(SEP) :]
            self._state = "recipient"
        elif not (SEP.startswith(self._buffer) and not final):
            self._state = "text"  # words after the calls, with no recipient
        return []


class FunctionaryFormat(ChatFormat):
    name = "functionary-v3.2"
    label = "functionary >>>recipient messages"
    markers = (">>>all", ">>>${recipient}")

    def render(self, calls: Sequence[ProbeCall]) -> str:
        """The turn's text after the prompt's `>>>`."""
        return SEP.join(f"{c.name}\n{json.dumps(c.arguments, ensure_ascii=False)}" for c in calls)

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        alternatives = [
            f"{kit.lit(name + chr(10))} {kit.json_value(schema, f'fn{n}')}"
            for n, (name, schema) in enumerate(calls)
        ]
        call = kit.rule("call", " | ".join(alternatives))
        sep = kit.lit(SEP)
        if max_calls is None:
            return f"{call} ( {sep} {call} )*"
        return f"{call}" + f" ( {sep} {call}" * (max_calls - 1) + " )?" * (max_calls - 1)

    def reader(self, options: ParseOptions) -> StreamParser:
        return FunctionaryParser(options)


FUNCTIONARY_V32 = FunctionaryFormat()
