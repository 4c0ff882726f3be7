"""Messages reshaped for what one chat template can render: its TemplateCaps, which
_template_caps.py finds by probing the template at load.

The messages come in the shape Chat Completions uses (arguments parsed to objects where they
are JSON, reasoning in `reasoning_content`); each template was written for one caller, and
these changes give it the shape its caller gave, as llama.cpp's template engine does. They
change the rendered prompt only: ids, arguments and messages stay what respond keeps.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["TemplateCaps", "adapt_messages", "short_call_id"]

_ALPHABET = string.ascii_letters + string.digits
SHORT_ID_LENGTH = 9

CallId = Literal["any", "alnum9"]


@dataclass(frozen=True)
class TemplateCaps:
    """What the template renders and the shapes it needs (defaults: a plain chat template
    that renders no tools)."""

    system_role: bool = True  # a system message shows; else it joins the next user message
    tools_list: bool = False  # `tools` must be a list, even empty (None fails)
    tools: bool = False  # the tool definitions show
    tool_calls: bool = False  # an assistant message's calls show (their arguments)
    tool_results: bool = False  # a tool message's content shows
    object_arguments: bool = True  # arguments as objects; else as JSON strings
    parallel_calls: bool = False  # two calls in one message show; else one per message
    call_id: CallId = "any"  # "alnum9": ids must be 9 letters or digits (Mistral's)
    call_ids_shown: bool = False  # the call ids appear in the prompt
    reasoning_key: str | None = None  # the message field its reasoning is read from
    # Reasoning shows in the turn's call loop (after the last user message; for a template
    # that shows no calls, on its last answer), and before the last user message.
    reasoning_in_turn: bool = False
    reasoning_in_history: bool = False  # reasoning before the last user message shows

    def describe(self) -> str:
        """One line for logs and the banner."""
        if not self.tools:
            flags = ["tools not shown (respond describes them)"]
        elif not self.tool_calls:
            flags = ["tools", "calls not shown"]
        else:
            flags = [
                "tools",
                "parallel calls" if self.parallel_calls else "one call per message",
                f"arguments as {'objects' if self.object_arguments else 'JSON strings'}",
            ]
        if self.call_id != "any":
            flags.append(f"call ids {self.call_id}")
        if not self.system_role:
            flags.append("system text into the user message")
        if self.reasoning_key is not None:
            flags.append(f"reasoning from {self.reasoning_key}")
        return ", ".join(flags)


def short_call_id(call_id: str) -> str:
    """A stable 9-character alphanumeric id for `call_id` (Mistral's templates refuse any
    other shape): the same id always maps to the same short one, so a call and its result
    still match, turn after turn. An id already in that shape (one the model wrote itself)
    is kept, so the prompt shows the call as the model wrote it."""
    if len(call_id) == SHORT_ID_LENGTH and call_id.isascii() and call_id.isalnum():
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest(), "big")
    chars = []
    for _ in range(SHORT_ID_LENGTH):
        number, index = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[index])
    return "".join(chars)


def adapt_messages(
    messages: Sequence[Mapping[str, Any]], caps: TemplateCaps
) -> list[dict[str, Any]]:
    """`messages` (not changed) as the template with `caps` can render them."""
    out = [dict(message) for message in messages]
    if not caps.system_role:
        out = _system_into_user(out)
    if caps.tool_calls and not caps.parallel_calls:
        out = _one_call_per_message(out)
    return [_adapt_message(message, caps) for message in out]


def _adapt_message(message: dict[str, Any], caps: TemplateCaps) -> dict[str, Any]:
    if "tool_calls" in message:
        message["tool_calls"] = [_adapt_call(call, caps) for call in message["tool_calls"]]
    if caps.call_id == "alnum9" and message.get("tool_call_id") is not None:
        message["tool_call_id"] = short_call_id(message["tool_call_id"])
    key = caps.reasoning_key
    if key is not None and key != "reasoning_content" and "reasoning_content" in message:
        message[key] = message.pop("reasoning_content")
    return message


def _adapt_call(call: Mapping[str, Any], caps: TemplateCaps) -> dict[str, Any]:
    function = dict(call["function"])
    arguments = function.get("arguments")
    if not caps.object_arguments and not isinstance(arguments, str):
        function["arguments"] = json.dumps(arguments, ensure_ascii=False)
    elif caps.object_arguments and isinstance(arguments, str):
        function["arguments"] = _parsed(arguments)
    adapted = {**call, "function": function}
    if caps.call_id == "alnum9" and "id" in call:
        adapted["id"] = short_call_id(call["id"])
    return adapted


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # not JSON: the text as it was written


def _system_into_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each system message's text in front of the next user message's (Gemma 2 refuses the
    system role); one with no user message after it becomes a user message."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in messages:
        if message.get("role") == "system":
            pending.append(str(message.get("content") or ""))
            continue
        if message.get("role") == "user" and pending:
            # Its own paragraph in front of the user's text.
            message["content"] = "\n\n".join([*pending, str(message.get("content") or "")])
            pending = []
        out.append(message)
    if pending:
        out.append({"role": "user", "content": "\n\n".join(pending)})
    return out


def _one_call_per_message(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parallel calls as one call per assistant message, each followed by its result (Llama
    3.x templates refuse two calls in one message)."""
    results = {
        message["tool_call_id"]: message
        for message in messages
        if message.get("role") == "tool" and message.get("tool_call_id") is not None
    }
    moved: set[int] = set()
    out: list[dict[str, Any]] = []
    for message in messages:
        if id(message) in moved:
            continue
        calls = message.get("tool_calls") or []
        if len(calls) < 2:
            out.append(message)
            continue
        for index, call in enumerate(calls):
            part = {**message, "tool_calls": [call]}
            if index > 0:  # the text and reasoning once, with the first call
                part["content"] = ""
                part.pop("reasoning_content", None)
            out.append(part)
            result = results.get(call.get("id"))
            if result is not None and index < len(calls) - 1:
                out.append(result)
                moved.add(id(result))
    return out
