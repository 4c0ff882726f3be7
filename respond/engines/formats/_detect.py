"""Which format a chat template teaches its model: rendered, then read off the text.

A probe conversation (a call, its result) is rendered with the template itself; the
format whose own rendering of that call appears in the text is the template's. This checks
each family's markup against the real template, down to whitespace. Only a template that
cannot render the probe is told by the markers in its source: one that renders it is known
by what it writes, or falls back (markers would take the DeepSeek R1 Llama distill, whose
template names DeepSeek's call tokens but renders no call, for `deepseek-r1`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from respond.engines.formats._base import THINK_TAGS, ChatFormat, ProbeCall, Think
from respond.engines.formats._families import FORMATS, THINKS

__all__ = ["PROBE", "Chosen", "choose_format", "effort_variables", "format_named", "probe_messages"]

log = logging.getLogger("respond.engine")

# Renders (messages, tools) with the template, no generation prompt.
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]]], str]

PROBE = ProbeCall("get_weather", {"city": "Paris", "days": 2}, "call00000")
PROBE_PAIR = [PROBE, ProbeCall("get_weather", {"city": "Rome", "days": 3}, "call00001")]
PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


@dataclass(frozen=True)
class Chosen:
    """The format a model got, and how: for the log, the banner and /v1/models."""

    format: ChatFormat | None  # None: unknown, the Hermes fallback prompt
    think: Think | None
    how: str  # "rendered probe", "markers", "--chat-format", "fallback"

    def describe(self) -> str:
        tools = self.format.label if self.format else "hermes fallback prompt (format unknown)"
        reasoning = self.think.label if self.think else "none"
        return f"tools: {tools}, reasoning: {reasoning}"


def format_named(name: str) -> ChatFormat:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    known = ", ".join(f.name for f in FORMATS)
    raise ValueError(f"unknown chat format {name!r} (known: {known})")


def probe_messages(
    calls: Sequence[ProbeCall], *, string_arguments: bool = False
) -> list[dict[str, Any]]:
    """A user turn, an assistant turn of only `calls`, and their results."""
    tool_calls = [
        {
            "id": call.call_id or f"call{n:05d}",  # nine alphanumerics, as Mistral's wants
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments)
                if string_arguments
                else dict(call.arguments),
            },
        }
        for n, call in enumerate(calls)
    ]
    results = [
        {
            "role": "tool",
            "tool_call_id": c.call_id or f"call{n:05d}",
            "name": c.name,
            "content": "sunny",
        }
        for n, c in enumerate(calls)
    ]
    return [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        *results,
    ]


def choose_format(source: str, render: Render | None, override: str | None = None) -> Chosen:
    """The format for a template (`override`: a format's name, from --chat-format)."""
    if override:
        fmt = format_named(override)
        return Chosen(fmt, _think(source, fmt), "--chat-format")
    one = _rendered(render, [PROBE]) if render is not None else []
    two = _rendered(render, PROBE_PAIR) if render is not None else []
    matching = [f for f in FORMATS if any(f.render([PROBE]) in text for text in one)]
    # Of those, the one that writes two calls as the template does (families differ only
    # in what comes between calls).
    for fmt in matching:
        if fmt.single or any(fmt.render(PROBE_PAIR) in text for text in two):
            return Chosen(fmt, _think(source, fmt), "rendered probe")
    if matching:
        log.warning(
            "the template writes one call as format %s does, two calls otherwise: parallel "
            "calls will not be written as the template writes them",
            matching[0].name,
        )
        return Chosen(matching[0], _think(source, matching[0]), "rendered probe")
    if not one:
        for fmt in FORMATS:
            if all(marker in source for marker in fmt.markers):
                return Chosen(fmt, _think(source, fmt), "markers")
    return Chosen(None, _think(source, None), "fallback")


def _rendered(render: Render, calls: Sequence[ProbeCall]) -> list[str]:
    texts = []
    for string_arguments in (False, True):
        try:
            messages = probe_messages(calls, string_arguments=string_arguments)
            texts.append(render(messages, PROBE_TOOLS))
        except Exception as exc:  # a template that cannot render the probe: say so, go on
            log.debug("the template does not render a probe call (%s)", exc)
    return texts


def _think(source: str, fmt: ChatFormat | None) -> Think | None:
    if fmt is not None and fmt.think is not None:
        return fmt.think
    for think in (*THINKS, THINK_TAGS):
        if think.open.strip() in source:
            return think
    return None


_EFFORT_LEVELS = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}


# Kimi K3's `thinking_effort` takes low, high and max, and refuses anything else.
_THINKING_EFFORT = {
    "minimal": "low",
    "low": "low",
    "medium": "high",
    "high": "high",
    "xhigh": "max",
}


def effort_variables(source: str, effort: str | None) -> dict[str, Any]:
    """The template variables that carry `reasoning.effort`, for the templates that take
    them: `enable_thinking` (Qwen3, SmolLM3...), `thinking` (DeepSeek V3.1, Kimi K3...),
    `reasoning_effort` (gpt-oss: low, medium, high), `thinking_effort` (Kimi K3)."""
    if effort is None:
        return {}
    out: dict[str, Any] = {}
    if re.search(r"\benable_thinking\b", source):
        out["enable_thinking"] = effort != "none"
    if re.search(r"(?<![.\w])thinking\s+is\s+(?:not\s+)?(?:un)?defined", source):
        out["thinking"] = effort != "none"
    if re.search(r"\breasoning_effort\b", source) and effort in _EFFORT_LEVELS:
        out["reasoning_effort"] = _EFFORT_LEVELS[effort]
    if re.search(r"\bthinking_effort\b", source) and effort in _THINKING_EFFORT:
        out["thinking_effort"] = _THINKING_EFFORT[effort]
    return out
