"""Render a conversation with the model's own chat template (Jinja, from the GGUF).

The template is compiled in the environment real templates are written for
(_template_env), probed once for what it renders and the shapes it needs (_template_caps),
and every conversation is reshaped for it before rendering (_template_adapt).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jinja2 import meta
from jinja2.exceptions import TemplateError, TemplateSyntaxError

from respond.engines._base import ChatMessage, EngineError, FunctionSpec, ToolCall
from respond.engines.formats import HERMES, ChatFormat, ProbeCall
from respond.engines.llamacpp._template_adapt import TemplateCaps, adapt_messages
from respond.engines.llamacpp._template_caps import probe_caps
from respond.engines.llamacpp._template_env import TemplateEnvironment, frozen

__all__ = [
    "ChatTemplate",
    "TemplateCaps",
    "TemplateError",
    "TemplateRefusedError",
    "UnusableTemplateError",
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


class TemplateRefusedError(EngineError):
    """The template raised on a conversation (Mistral's "roles must alternate"): the
    client's conversation is one this model cannot be given, a 400."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_value", status=400, param="input")


class UnusableTemplateError(ValueError):
    """The model's chat template cannot be compiled, or cannot render a plain chat."""


class ChatTemplate:
    """A model's chat template, compiled and probed (UnusableTemplateError if it cannot be
    compiled or cannot render a plain user message)."""

    def __init__(
        self,
        source: str | None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        origin: str = "GGUF key tokenizer.chat_template",
    ) -> None:
        env = TemplateEnvironment()
        self.source = source or CHATML
        self.bos_token = bos_token
        self.eos_token = eos_token
        try:
            self._template = env.from_string(self.source)
            # What it reads from its context (enable_thinking, reasoning_effort, ...).
            self.variables = frozenset(meta.find_undeclared_variables(env.parse(self.source)))
            self.caps: TemplateCaps = probe_caps(self._render_as_given)
        except Exception as exc:  # whatever the template raises is the reason
            raise UnusableTemplateError(_unusable(exc, origin)) from exc

    @property
    def supports_tools(self) -> bool:
        """The template shows the tools it is given (else respond describes them itself)."""
        return self.caps.tools

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
        """The prompt for `messages` (in message_dicts' shape) and `tools` (tool_dicts'),
        reshaped for this template first; `extra` are further template variables."""
        given = list(tools) if tools else None
        if given is None and self.caps.tools_list:
            given = []
        adapted = adapt_messages(messages, self.caps)
        try:
            return self._render_as_given(adapted, given, add_generation_prompt, **extra)
        except Exception as exc:  # raise_exception, and the template's own bugs
            raise TemplateRefusedError(
                f"The model's chat template cannot render this conversation: {exc}"
            ) from exc

    def _render_as_given(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool = True,
        **extra: Any,
    ) -> str:
        context = {**self._implied(tools), **extra}
        return self._template.render(
            messages=frozen(messages),
            tools=None if tools is None else frozen(list(tools)),
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            **context,
        )

    def _implied(self, tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        """Variables some templates read besides the usual ones, as their runtimes give
        them: the date (llama.cpp's `datetime` and `date_string`), and the tools as a
        JSON `functions` string (Firefunction v2's model card)."""
        read = self.variables
        now = datetime.now()
        implied: dict[str, Any] = {}
        if "datetime" in read:
            implied["datetime"] = now.strftime("%b %d %Y")
        if "date_string" in read:
            implied["date_string"] = now.strftime("%d %b %Y")
        if "functions" in read:
            functions = [tool.get("function", tool) for tool in tools or ()]
            implied["functions"] = json.dumps(functions, indent=4, ensure_ascii=False)
        return implied


def _unusable(exc: Exception, origin: str) -> str:
    where = f" (line {exc.lineno})" if isinstance(exc, TemplateSyntaxError) else ""
    return (
        f"its chat template ({origin}) cannot be used: "
        f"{type(exc).__name__}{where}: {exc}. Give the model a working template "
        "(`respond serve --chat-template-file FILE`, or a copy of the GGUF made with "
        "`gguf-new-metadata --chat-template-file FILE IN OUT`, from the gguf package) "
        "or serve another GGUF"
    )


def message_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """ChatMessages in the dict shape chat templates (and Chat Completions) expect."""
    out: list[dict[str, Any]] = []
    names = {call.call_id: call.name for message in messages for call in message.tool_calls}
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
            # The function's name, which templates print with its result (`message.name`).
            if message.tool_call_id in names:
                entry["name"] = names[message.tool_call_id]
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
# For templates whose format respond knows but that do not show the tools (DeepSeek R1's
# distills, V3.1: their model cards have the caller describe them): the same, with the call
# in the format's own syntax, the one its grammar writes.
FORMAT_TOOLS_PROMPT = """You can call functions. The available functions, as JSON Schema:
{functions}

To call a function, answer with exactly this, with the function's name and its arguments
in place of the example's:
{example}
{results}If no function is needed, answer normally."""
RESULTS = "Function results come back as <tool_response>...</tool_response>. "
EXAMPLE_CALL = ProbeCall("<function name>", {"<argument>": "<value>"})


def fallback_tool_messages(
    messages: Sequence[ChatMessage],
    tools: Sequence[FunctionSpec],
    chat_format: ChatFormat = HERMES,
    *,
    calls_as_text: bool = True,
) -> list[ChatMessage]:
    """Messages for a template that does not show tools: tools in the system prompt, with
    how to call them in `chat_format` (the syntax the grammar writes); with `calls_as_text`,
    calls and results as text too (calls in `chat_format`), else left to the template,
    which writes them in that syntax itself."""
    out: list[ChatMessage] = []
    if tools:
        functions = "\n".join(
            json.dumps(entry["function"], ensure_ascii=False) for entry in tool_dicts(tools)
        )
        prompt = _tools_prompt(functions, chat_format, calls_as_text)
        if messages and messages[0].role in ("system", "developer"):
            first, *messages = messages
            prompt = f"{first.content}\n\n{prompt}"
        out.append(ChatMessage(role="system", content=prompt))
    for message in messages:
        if message.tool_calls and calls_as_text:
            calls = _calls_text(message.tool_calls, chat_format)
            content = f"{message.content}\n{calls}" if message.content else calls
            out.append(ChatMessage(role="assistant", content=content))
        elif message.role == "tool" and calls_as_text:
            result = f"<tool_response>\n{message.content}\n</tool_response>"
            if out and out[-1].role == "user" and out[-1].content.endswith("</tool_response>"):
                # Parallel results in one user message: templates that want user and
                # assistant to alternate (Gemma 2) refuse two user messages in a row.
                result = f"{out.pop().content}\n{result}"
            out.append(ChatMessage(role="user", content=result))
        else:
            out.append(message)
    return out


def _tools_prompt(functions: str, chat_format: ChatFormat, calls_as_text: bool) -> str:
    if chat_format is HERMES:  # the prompt the bundled model has always been given
        return FALLBACK_TOOLS_PROMPT.format(functions=functions)
    return FORMAT_TOOLS_PROMPT.format(
        functions=functions,
        example=chat_format.render([EXAMPLE_CALL]),
        results=RESULTS if calls_as_text else "",
    )


def _calls_text(calls: Sequence[ToolCall], chat_format: ChatFormat) -> str:
    """An assistant turn's calls as `chat_format` writes them."""
    parsed = [(call.name, _arguments(call.arguments)) for call in calls]
    if not all(isinstance(arguments, dict) for _, arguments in parsed):
        # Arguments that are not an object (a client's history may hold any): as Hermes
        # writes them, the one syntax that holds any JSON.
        return "\n".join(
            "<tool_call>\n"
            + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
            + "\n</tool_call>"
            for name, arguments in parsed
        )
    written = [ProbeCall(name, arguments) for name, arguments in parsed]
    if chat_format.single:  # one call a turn: each written alone
        return "\n".join(chat_format.render([call]) for call in written)
    return chat_format.render(written)
