"""Render a conversation with the model's own chat template (Jinja, from the GGUF)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from respond.engines._base import ChatMessage, FunctionSpec

__all__ = ["ChatTemplate", "TemplateError", "message_dicts", "tool_dicts"]

# Used when a GGUF carries no template: ChatML, the most common format.
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _raise(message: str) -> None:
    raise TemplateError(message)


class ChatTemplate:
    def __init__(self, source: str | None, *, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(
            value, indent=indent, ensure_ascii=False
        )
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        self.source = source or CHATML
        self._template = env.from_string(self.source)
        self.bos_token = bos_token
        self.eos_token = eos_token

    @property
    def supports_tools(self) -> bool:
        return "tools" in self.source

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **extra: Any,
    ) -> str:
        return self._template.render(
            messages=list(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            **extra,
        )


def message_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """ChatMessages in the dict shape chat templates (and Chat Completions) expect."""
    out: list[dict[str, Any]] = []
    for message in messages:
        # Local templates know system but rarely developer; they mean the same thing here.
        role = "system" if message.role == "developer" else message.role
        entry: dict[str, Any] = {"role": role, "content": message.content}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call.arguments)},
                }
                for call in message.tool_calls
            ]
        if message.tool_call_id is not None:
            entry["tool_call_id"] = message.tool_call_id
        if message.reasoning:
            entry["reasoning_content"] = message.reasoning
        out.append(entry)
    return out


def tool_dicts(tools: Sequence[FunctionSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def _arguments(arguments: str) -> Any:
    # Templates index into arguments (Qwen, Llama 3 do `arguments | tojson`); give them
    # the parsed object when it is JSON, the raw string otherwise.
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
