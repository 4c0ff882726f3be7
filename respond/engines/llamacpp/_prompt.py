"""A turn's prompt: its conversation and tools rendered with the model's chat template.

The template gets the turn's tools when it shows tools and respond knows the format it
writes calls in. Otherwise respond describes them in the system prompt (_template.py), and
asks for calls in the syntax the turn's grammar writes: the format's, or Hermes when the
format is unknown. A template whose own rendering of calls gave the format (DeepSeek R1's
distills, V3.1: they show calls but not tools) writes the history's calls and results
itself; for any other, respond writes them as text.
`reasoning.effort` reaches the variables the template takes (`enable_thinking`,
`thinking`, `reasoning_effort`: formats/_detect.py).

A model that reads images (an mmproj) gets its projector's marker in a message's text for
each of the message's images, before the text (the templates take a message's content as
a string); the engine reads the images in at the markers (_media.py).

A forced call's grammar writes what the template's history writes before the turn's
calls (`call_lead`), so that the next turn's prompt holds the turn as the model wrote it.
"""

from __future__ import annotations

import dataclasses
import json

from respond.engines._base import ChatMessage, ChatTurn, EngineError, ToolCall
from respond.engines._tools import visible_tools
from respond.engines.formats import HERMES, PROBE, Chosen, effort_variables
from respond.engines.llamacpp._grammar import REASONING_PROBE, CallLead
from respond.engines.llamacpp._template import (
    ChatTemplate,
    fallback_tool_messages,
    message_dicts,
    tool_dicts,
)

__all__ = ["call_lead", "render_prompt"]


def render_prompt(
    template: ChatTemplate,
    turn: ChatTurn,
    *,
    chosen: Chosen,
    add_generation_prompt: bool = True,
    marker: str | None = None,
) -> str:
    """The prompt text of `turn`, for a template given the format `chosen`; with `marker`,
    each image of a message marked in its text."""
    extra = effort_variables(template.source, turn.reasoning_effort)
    extra["add_generation_prompt"] = add_generation_prompt
    tools = visible_tools(turn)
    fmt = chosen.format
    given = turn.messages if marker is None else _marked(turn.messages, marker)
    if fmt is not None and template.supports_tools:
        return template.render(message_dicts(given), tools=tool_dicts(tools) or None, **extra)
    caps = template.caps
    own = chosen.how == "rendered probe" and caps.tool_calls and caps.tool_results
    messages = fallback_tool_messages(
        given, tools, fmt or HERMES, calls_as_text=fmt is None or not own
    )
    return template.render(message_dicts(messages), **extra)


def _marked(messages: list[ChatMessage], marker: str) -> list[ChatMessage]:
    """Each message with images has a marker per image before its text."""
    return [
        dataclasses.replace(m, content=marker * len(m.images) + "\n" + m.content) if m.images else m
        for m in messages
    ]


def call_lead(
    template: ChatTemplate,
    turn: ChatTurn,
    *,
    chosen: Chosen,
    prompt: str,
    marker: str | None = None,
) -> CallLead | None:
    """What the template's history writes between `prompt` (`turn`'s) and a turn of calls
    after it, found by rendering the conversation with a probe call as that turn and its
    result after it, and again with reasoning before the call. None where neither history
    begins with the prompt and holds the call as the format writes it."""
    call = ToolCall(PROBE.call_id or "call00000", PROBE.name, json.dumps(PROBE.arguments))
    alone = ChatMessage("assistant", tool_calls=(call,))
    bare = _before_calls(template, turn, chosen, prompt, alone, marker)
    reasoned = dataclasses.replace(alone, reasoning=REASONING_PROBE)
    around = _before_calls(template, turn, chosen, prompt, reasoned, marker)
    if around is None or around.count(REASONING_PROBE) != 1:
        return None if bare is None else CallLead(bare)
    pre, post = around.split(REASONING_PROBE)
    return CallLead(bare, (pre, post))


def _before_calls(
    template: ChatTemplate,
    turn: ChatTurn,
    chosen: Chosen,
    prompt: str,
    message: ChatMessage,
    marker: str | None,
) -> str | None:
    # The call's result after it, as in the next turn's history: some templates write a
    # turn otherwise when it is the conversation's last (Qwen3: an empty think block).
    result = ChatMessage("tool", "sunny", tool_call_id=message.tool_calls[0].call_id)
    probed = dataclasses.replace(turn, messages=[*turn.messages, message, result])
    try:
        text = render_prompt(
            template, probed, chosen=chosen, add_generation_prompt=False, marker=marker
        )
    except EngineError:  # a template that refuses the probe turn: no lead to follow
        return None
    written = (chosen.format or HERMES).render([PROBE])
    at = text.find(written, len(prompt))
    return text[len(prompt) : at] if text.startswith(prompt) and at >= 0 else None
