"""Chat Completions on the wire, as a translation of the one run.

In: a chat body becomes a Responses request (`to_request`): messages become input items
(an assistant's tool_calls become function_call items, a tool message a
function_call_output), tools and tool_choice are flattened, response_format becomes
text.format, max_(completion_)tokens becomes max_output_tokens, and nothing is stored. It
is then prepared and run like any POST /v1/responses, so the server's defaults (`--temp`,
`--n-predict`) and every check apply the same way. An error that preparation raises is
renamed to the client's own path (`input[3].call_id` -> `messages[2].tool_call_id`).

Out: the run's events become chat.completion.chunk frames (`chunks`); its final, folded
response becomes one chat.completion (`completion`). Nothing here folds deltas. Reasoning
goes out as `reasoning_content`, as vLLM and llama-server send it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from respond._ids import new_id
from respond.api._common import sse_frame
from respond.protocol import events as ev
from respond.protocol.chat import ChatBody
from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.items import FunctionCallItem, ReasoningItem
from respond.protocol.requests import (
    CreateResponseBody,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputImage,
    InputItem,
    InputMessage,
    InputText,
    OutputTextIn,
    ReasoningInput,
    ReasoningParam,
    ReasoningTextIn,
    RefusalIn,
    TextFormat,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    TextFormatText,
    TextParam,
)
from respond.protocol.resource import ResponseResource, ResponseUsage
from respond.protocol.tools import FunctionTool, Tool
from respond.responses.run import PreparedRun

__all__ = ["ChatRequest", "chunks", "completion", "to_request"]

JSON = dict[str, Any]
DONE = b"data: [DONE]\n\n"
_ROLES = ("system", "developer", "user", "assistant", "tool")
_FUNCTION_FIELDS = ("name", "description", "parameters", "strict")


# ---------------------------------------------------------------- in


@dataclass
class ChatRequest:
    """A chat body as a Responses request, and where each Responses param came from."""

    body: CreateResponseBody
    # A Responses param path (prefix) -> the chat body's path it was translated from.
    places: dict[str, str]

    def renamed(self, exc: APIError) -> APIError:
        """`exc` with its param (and the param in its message) named as the client wrote it."""
        param = exc.param
        if param is None:
            return exc
        matches = [p for p in self.places if param == p or param.startswith((p + ".", p + "["))]
        if matches:
            ours = max(matches, key=len)
            exc.param = self.places[ours] + param[len(ours) :]
            exc.message = exc.message.replace(f"'{param}'", f"'{exc.param}'")
        return exc


def to_request(chat: ChatBody) -> ChatRequest:
    """The Responses request a chat body asks for; malformed parts raise a 400 naming them."""
    places = {"input": "messages"}
    items = _Items(places)
    for index, message in enumerate(chat.messages):
        items.message(message, f"messages[{index}]")
    max_tokens = chat.max_completion_tokens or chat.max_tokens
    places["max_output_tokens"] = (
        "max_completion_tokens" if chat.max_completion_tokens else "max_tokens"
    )
    body = CreateResponseBody(
        model=chat.model,
        input=items.items,
        tools=_tools(chat.tools, places),
        tool_choice=_tool_choice(chat.tool_choice, places),
        parallel_tool_calls=chat.parallel_tool_calls,
        text=TextParam(format=_text_format(chat.response_format, places)),
        temperature=chat.temperature,
        top_p=chat.top_p,
        presence_penalty=chat.presence_penalty,
        frequency_penalty=chat.frequency_penalty,
        max_output_tokens=max_tokens,
        seed=chat.seed,
        reasoning=ReasoningParam(effort=chat.reasoning_effort) if chat.reasoning_effort else None,
        user=chat.user,
        store=False,
    )
    return ChatRequest(body=body, places=places)


def _invalid(param: str, message: str) -> APIError:
    return APIError(400, message, param=param, code="invalid_value")


class _Items:
    """Input items made from chat messages, noting where each came from."""

    def __init__(self, places: dict[str, str]) -> None:
        self.items: list[InputItem] = []
        self._places = places

    def add(self, item: InputItem, where: str, fields: dict[str, str] | None = None) -> None:
        ours = f"input[{len(self.items)}]"
        self.items.append(item)
        self._places[ours] = where
        for name, theirs in (fields or {}).items():
            self._places[f"{ours}.{name}"] = f"{where}.{theirs}"

    def message(self, raw: JSON, where: str) -> None:
        role = raw.get("role")
        if role not in _ROLES:
            raise _invalid(
                f"{where}.role",
                f"Invalid role {role!r}: expected one of {', '.join(_ROLES)}.",
            )
        if role == "tool":
            self._tool_result(raw, where)
        elif role == "assistant":
            self._assistant(raw, where)
        else:
            content = _content(raw.get("content"), where, assistant=False)
            self.add(InputMessage(role=role, content=content), where)

    def _assistant(self, raw: JSON, where: str) -> None:
        reasoning = raw.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise _invalid(f"{where}.reasoning_content", "reasoning_content must be a string.")
        if reasoning:
            part = ReasoningTextIn(type="reasoning_text", text=reasoning)
            self.add(ReasoningInput(type="reasoning", content=[part]), f"{where}.reasoning_content")
        content = _content(raw.get("content"), where, assistant=True)
        calls = raw.get("tool_calls") or []
        if not isinstance(calls, list):
            raise _invalid(f"{where}.tool_calls", "tool_calls must be an array.")
        if content or not calls:
            self.add(InputMessage(role="assistant", content=content), where)
        for index, call in enumerate(calls):
            self._call(call, f"{where}.tool_calls[{index}]")

    def _call(self, call: Any, where: str) -> None:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or call.get("type", "function") != "function":
            raise _invalid(f"{where}.function", "Each tool call needs a 'function' object.")
        call_id, name = call.get("id"), function.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise _invalid(f"{where}.id", "Each tool call needs an 'id' (a string).")
        if not isinstance(name, str) or not name:
            raise _invalid(f"{where}.function.name", "Each tool call needs a function 'name'.")
        arguments = function.get("arguments", "")
        if isinstance(arguments, dict):  # some clients send the object itself
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise _invalid(f"{where}.function.arguments", "arguments must be a JSON string.")
        item = FunctionCallInput(
            type="function_call", call_id=call_id, name=name, arguments=arguments
        )
        fields = {"call_id": "id", "name": "function.name", "arguments": "function.arguments"}
        self.add(item, where, fields)

    def _tool_result(self, raw: JSON, where: str) -> None:
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _invalid(
                f"{where}.tool_call_id", "A tool message needs the 'tool_call_id' it answers."
            )
        output = _content(raw.get("content"), where, assistant=False)
        item = FunctionCallOutputInput(type="function_call_output", call_id=call_id, output=output)
        self.add(item, where, {"call_id": "tool_call_id", "output": "content"})


def _content(value: Any, where: str, *, assistant: bool) -> str | list[Any]:
    """A message's content as input content: a string, or its parts one for one."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _invalid(f"{where}.content", "content must be a string or an array of parts.")
    return [_part(part, f"{where}.content[{index}]", assistant) for index, part in enumerate(value)]


def _part(part: Any, where: str, assistant: bool) -> Any:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text" and isinstance(part.get("text"), str):
        text = part["text"]
        return (
            OutputTextIn(type="output_text", text=text)
            if assistant
            else InputText(type="input_text", text=text)
        )
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str) or not url:
            raise _invalid(f"{where}.image_url.url", "An image_url part needs a 'url'.")
        return InputImage(type="input_image", image_url=url)
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return RefusalIn(type="refusal", refusal=part["refusal"])
    if kind in ("text", "refusal"):
        raise _invalid(where, f"A {kind} part needs its '{kind}' string.")
    raise _invalid(
        f"{where}.type",
        f"Unsupported content part type {kind!r}: expected text, image_url or refusal.",
    )


def _tools(tools: list[JSON], places: dict[str, str]) -> list[Tool]:
    """Function tools, flattened to the Responses shape; other types are not run (as before)."""
    out: list[Tool] = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            continue
        where = f"tools[{index}]"
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _invalid(f"{where}.function", "A function tool needs a 'function' object.")
        ours = f"tools[{len(out)}]"
        places[ours] = where
        for name in _FUNCTION_FIELDS:
            places[f"{ours}.{name}"] = f"{where}.function.{name}"
        data = {
            "type": "function",
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
            # Chat Completions functions are not strict unless they say so.
            "strict": bool(function.get("strict", False)),
        }
        try:
            out.append(FunctionTool.model_validate(data))
        except ValidationError as exc:
            raise _invalid_at(exc, data, f"{where}.function", "name") from None
    return out


def _tool_choice(
    choice: Literal["auto", "none", "required"] | JSON, places: dict[str, str]
) -> Literal["auto", "none", "required"] | JSON:
    if isinstance(choice, str):
        return choice
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if choice.get("type") != "function" or not isinstance(name, str):
        raise _invalid(
            "tool_choice",
            "tool_choice must be 'auto', 'none', 'required' or "
            '{"type": "function", "function": {"name": ...}}.',
        )
    places["tool_choice.name"] = "tool_choice.function.name"
    return {"type": "function", "name": name}


def _text_format(fmt: JSON | None, places: dict[str, str]) -> TextFormat:
    places["text.format"] = "response_format"
    kind = (fmt or {}).get("type", "text")
    if kind == "text":
        return TextFormatText(type="text")
    if kind == "json_object":
        return TextFormatJsonObject(type="json_object")
    spec = (fmt or {}).get("json_schema")
    if kind != "json_schema":
        raise _invalid("response_format.type", "Expected text, json_object or json_schema.")
    if not isinstance(spec, dict):
        raise _invalid("response_format.json_schema", "json_schema must be an object.")
    places["text.format.schema"] = "response_format.json_schema.schema"
    data = {
        "type": "json_schema",
        "name": spec.get("name", "response"),
        "schema": spec.get("schema"),
        "description": spec.get("description"),
        "strict": bool(spec.get("strict", False)),
    }
    try:
        return TextFormatJsonSchema.model_validate(data)
    except ValidationError as exc:
        raise _invalid_at(exc, data, "response_format.json_schema", "schema") from None


def _invalid_at(exc: ValidationError, data: JSON, where: str, default: str) -> APIError:
    """A translated object's validation error, named at `where` in the chat body."""
    error = from_validation_error(exc, data)
    field_name = error.param or default
    error.param = f"{where}.{field_name}"
    error.message = error.message.replace(f"'{field_name}'", f"'{error.param}'")
    return error


# ---------------------------------------------------------------- out


def completion(response: ResponseResource) -> JSON:
    """A run's final response as one chat.completion."""
    message: JSON = {"role": "assistant", "content": response.output_text or None}
    reasoning = "".join(
        part.text
        for item in response.output
        if isinstance(item, ReasoningItem)
        for part in item.content
    )
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = [
        {
            "id": item.call_id,
            "type": "function",
            "function": {"name": item.name, "arguments": item.arguments},
        }
        for item in response.output
        if isinstance(item, FunctionCallItem)
    ]
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": response.created_at,
        "model": response.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(response),
                "logprobs": None,
            }
        ],
        "usage": _usage(response.usage),
    }


async def chunks(
    run: PreparedRun, events: AsyncIterator[ev.Event], *, include_usage: bool
) -> AsyncGenerator[bytes, None]:
    """A run's events as chat.completion.chunk SSE frames, then `data: [DONE]`."""
    stream = _Chunks(run, include_usage)
    async for event in events:
        for frame in stream.frames(event):
            yield sse_frame(frame)
    yield DONE


class _Chunks:
    """Translates one run's events, in order, into chunks."""

    def __init__(self, run: PreparedRun, include_usage: bool) -> None:
        self._run = run
        self._include_usage = include_usage
        self._head: JSON = {"id": new_id("chatcmpl"), "object": "chat.completion.chunk"}
        self._calls: dict[int, int] = {}  # output_index -> tool call index

    def frames(self, event: ev.Event) -> list[JSON]:
        if isinstance(event, ev.ResponseCreated):
            response = event.response
            self._head.update(created=response.created_at, model=response.model)
            return [self._chunk({"role": "assistant", "content": ""})]
        if isinstance(event, ev.OutputTextDelta):
            return [self._chunk({"content": event.delta})]
        if isinstance(event, ev.ReasoningTextDelta | ev.ReasoningDelta):  # either naming
            return [self._chunk({"reasoning_content": event.delta})]
        if isinstance(event, ev.OutputItemAdded) and isinstance(event.item, FunctionCallItem):
            index = self._calls[event.output_index] = len(self._calls)
            function = {"name": event.item.name, "arguments": ""}
            call = {"index": index, "id": event.item.call_id, "type": "function"}
            return [self._chunk({"tool_calls": [{**call, "function": function}]})]
        if isinstance(event, ev.FunctionCallArgumentsDelta):
            call = {"index": self._calls[event.output_index]}
            return [self._chunk({"tool_calls": [{**call, "function": {"arguments": event.delta}}]})]
        if isinstance(event, ev.ResponseFailed):
            return [self._error(event.response)]
        if isinstance(event, ev.ResponseCompleted | ev.ResponseIncomplete):
            return self._end(event.response)
        return []

    def _chunk(self, delta: JSON, finish: str | None = None) -> JSON:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**self._head, "choices": [choice]}

    def _end(self, response: ResponseResource) -> list[JSON]:
        out = [self._chunk({}, _finish_reason(response))]
        if self._include_usage:
            out.append({**self._head, "choices": [], "usage": _usage(response.usage)})
        return out

    def _error(self, response: ResponseResource) -> JSON:
        """A failure after the first byte: the error envelope as one frame."""
        error = response.error
        message = error.message if error else "The response was cancelled."
        code = error.code if error else "cancelled"
        return APIError(self._run.failure_status, message, code=code).body()


def _finish_reason(response: ResponseResource) -> str:
    if response.status == "incomplete":
        return "length"
    if any(isinstance(item, FunctionCallItem) for item in response.output):
        return "tool_calls"
    return "stop"


def _usage(usage: ResponseUsage | None) -> JSON | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.input_tokens_details.cached_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": usage.output_tokens_details.reasoning_tokens
        },
    }
