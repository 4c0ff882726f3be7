"""The seam between a model family's chat format and the embedded engine.

A `ChatFormat` knows, for one family of models, how a tool call is written (the exact
text the family's template renders for it), the grammar that writes it that way, and the
streaming parser that reads it back. `Think` is how the family marks its reasoning.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from respond.engines._base import Delta

__all__ = [
    "ChatFormat",
    "GrammarKit",
    "ParseOptions",
    "ProbeCall",
    "StreamParser",
    "Think",
    "ToolSchemas",
]

# A function's name -> its arguments' JSON Schema (None: any object). A parser given None
# instead of a mapping finds no calls: without tools, call markup is the model's text.
ToolSchemas = Mapping[str, Mapping[str, Any] | None] | None


@dataclass(frozen=True)
class Think:
    """Reasoning markup: text between `open` and `close` is reasoning, not the answer."""

    open: str
    close: str
    label: str
    gap: str = ""  # GBNF for what may follow `close` before the answer or the calls


THINK_TAGS = Think("<think>", "</think>", "think tags", gap="[ \\n]*")


@dataclass(frozen=True)
class ParseOptions:
    """What one turn's parser reads by, besides its format's markup: the turn's settings."""

    tools: ToolSchemas  # None: no tools, so call markup is the model's text
    think: Think | None  # the reasoning markup the output may hold
    in_reasoning: bool  # the prompt opened a reasoning block: the output starts inside it
    new_call_id: Callable[[], str]
    stop_at_call: bool = False  # stop where a call's markup begins (`halted_at`)


@dataclass(frozen=True)
class ProbeCall:
    """A call to render, as a template receives it: a name and parsed arguments."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None  # for the formats that write it (Mistral's [CALL_ID])


class StreamParser(Protocol):
    """Raw model text in, deltas out; markup split anywhere across chunks."""

    in_reasoning: bool
    halted_at: int | None

    def feed(self, chunk: str) -> list[Delta]: ...

    def close(self) -> list[Delta]: ...

    @property
    def unnamed_call(self) -> bool: ...


class GrammarKit(Protocol):
    """What a format's grammar is built with (GBNF; implemented over llama.cpp's converter)."""

    def lit(self, text: str) -> str:
        """A GBNF literal for exactly `text`."""
        ...

    def json_value(self, schema: Mapping[str, Any] | None, name: str) -> str:
        """A rule for one JSON value under `schema` (None: any object), written as the
        templates' `tojson` writes it (", " and ": ", nothing else)."""
        ...

    def properties(
        self, schema: Mapping[str, Any] | None, name: str
    ) -> list[tuple[str, Mapping[str, Any], bool]] | None:
        """(key, its schema with references resolved, required) of an object schema; None
        when the schema does not list its properties."""
        ...

    def rule(self, name: str, body: str) -> str:
        """Add a rule of respond's own; returns its name."""
        ...

    def text_until(self, marker: str, name: str) -> str:
        """A rule for any text that does not contain `marker`."""
        ...

    def raw_string(self, schema: Mapping[str, Any], name: str) -> str | None:
        """A rule for a string under `schema` written as it is (not as JSON), when the
        schema holds a custom tool's grammar; None otherwise."""
        ...


class ChatFormat(ABC):
    """One family's tool-call format. Subclasses set `name` and `label`."""

    name: str = ""
    label: str = ""  # for people: "qwen3-coder xml"
    markers: tuple[str, ...] = ()  # all in a template's source: this family (when it cannot render)
    think: Think | None = None  # the family's own reasoning markup, where it has one
    single: bool = False  # one call per turn, whatever parallel_tool_calls says

    @abstractmethod
    def render(self, calls: Sequence[ProbeCall]) -> str:
        """The text an assistant turn of only these calls is, as the template writes it."""

    @abstractmethod
    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        """A GBNF expression for 1..max_calls of `calls` (name, schema), exactly as `render`
        writes them."""

    def parser(
        self,
        *,
        tools: ToolSchemas,
        think: Think | None,
        in_reasoning: bool,
        new_call_id: Callable[[], str],
        stop_at_call: bool,
    ) -> StreamParser:
        """A parser for one generated turn."""
        return self.reader(ParseOptions(tools, think, in_reasoning, new_call_id, stop_at_call))

    @abstractmethod
    def reader(self, options: ParseOptions) -> StreamParser:
        """The parser of this format, reading by `options`."""
