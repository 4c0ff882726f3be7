"""A turn's prompt: its conversation and tools rendered with the model's chat template.

The template gets the turn's tools when it shows tools and respond knows the format it
writes calls in. Otherwise respond describes them in the system prompt (_template.py), and
asks for calls in the syntax the turn's grammar writes: the format's, or Hermes when the
format is unknown. A template whose own rendering of calls gave the format (DeepSeek R1's
distills, V3.1: they show calls but not tools) writes the history's calls and results
itself; for any other, respond writes them as text.
`reasoning.effort` reaches the variables the template takes (`enable_thinking`,
`thinking`, `reasoning_effort`: formats/_detect.py).
"""

from __future__ import annotations

from respond.engines._base import ChatTurn
from respond.engines._tools import visible_tools
from respond.engines.formats import HERMES, Chosen, effort_variables
from respond.engines.llamacpp._template import (
    ChatTemplate,
    fallback_tool_messages,
    message_dicts,
    tool_dicts,
)

__all__ = ["render_prompt"]


def render_prompt(template: ChatTemplate, turn: ChatTurn, *, chosen: Chosen) -> str:
    """The prompt text of `turn`, for a template given the format `chosen`."""
    extra = effort_variables(template.source, turn.reasoning_effort)
    tools = visible_tools(turn)
    fmt = chosen.format
    if fmt is not None and template.supports_tools:
        return template.render(
            message_dicts(turn.messages), tools=tool_dicts(tools) or None, **extra
        )
    caps = template.caps
    own = chosen.how == "rendered probe" and caps.tool_calls and caps.tool_results
    messages = fallback_tool_messages(
        turn.messages, tools, fmt or HERMES, calls_as_text=fmt is None or not own
    )
    return template.render(message_dicts(messages), **extra)
