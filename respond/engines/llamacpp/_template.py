"""Render a conversation with the model's own chat template (Jinja, from the GGUF)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from respond.engines._base import ChatMessage, FunctionSpec

__all__ = [
    "ChatTemplate",
    "TemplateError",
    "fallback_tool_messages",
    "message_dicts",
    "tool_dicts",
]

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

    @property
    def thinks(self) -> bool:
        """The template knows <think> blocks (Qwen3, DeepSeek-R1 style reasoning)."""
        return "<think>" in self.source

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


# For templates that know nothing of tools (the bundled SmolLM2's among them): tools are
# described in the system prompt and calls are written in the Hermes format, which the
# output parser reads and the tool grammar produces.
FALLBACK_TOOLS_PROMPT = """You can call functions. The available functions, as JSON Schema:
{functions}

To call a function, answer with exactly:
<tool_call>
{{"name": "<function name>", "arguments": <arguments as a JSON object>}}
</tool_call>
Function results come back as <tool_response>...</tool_response>. If no function is
needed, answer normally."""


def fallback_tool_messages(
    messages: Sequence[ChatMessage], tools: Sequence[FunctionSpec]
) -> list[ChatMessage]:
    """Messages for a template without tool support: tools in the system prompt, calls
    and results as text in the Hermes format the model is asked to use."""
    out: list[ChatMessage] = []
    if tools:
        functions = "\n".join(
            json.dumps(entry["function"], ensure_ascii=False) for entry in tool_dicts(tools)
        )
        prompt = FALLBACK_TOOLS_PROMPT.format(functions=functions)
        if messages and messages[0].role in ("system", "developer"):
            first, *messages = messages
            prompt = f"{first.content}\n\n{prompt}"
        out.append(ChatMessage(role="system", content=prompt))
    for message in messages:
        if message.tool_calls:
            calls = "\n".join(
                "<tool_call>\n"
                + json.dumps(
                    {"name": call.name, "arguments": _arguments(call.arguments)},
                    ensure_ascii=False,
                )
                + "\n</tool_call>"
                for call in message.tool_calls
            )
            content = f"{message.content}\n{calls}" if message.content else calls
            out.append(ChatMessage(role="assistant", content=content))
        elif message.role == "tool":
            result = f"<tool_response>\n{message.content}\n</tool_response>"
            out.append(ChatMessage(role="user", content=result))
        else:
            out.append(message)
    return out
