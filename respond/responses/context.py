"""Turn Responses input items into the chat messages an engine sees."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from respond._ids import new_id
from respond.engines._base import ChatMessage, ToolCall
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputFile,
    InputImage,
    InputItem,
    InputMessage,
    ItemReference,
    ReasoningInput,
    RefusalIn,
)

__all__ = ["items_to_messages", "normalize_input", "stored_item"]

_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
}


def normalize_input(value: str | Sequence[InputItem]) -> list[InputItem]:
    if isinstance(value, str):
        return [InputMessage(role="user", content=value)]
    return list(value)


def stored_item(item: InputItem) -> dict[str, Any]:
    """The wire form of an input item as it is kept and listed (with an id and status)."""
    data = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(item, InputMessage):
        content = item.content
        if isinstance(content, str):
            kind = "output_text" if item.role == "assistant" else "input_text"
            data["content"] = [{"type": kind, "text": content}]
        data["type"] = "message"
    data.setdefault("id", new_id(_ID_PREFIX.get(data["type"], "item")))
    data.setdefault("status", "completed")
    return data


def items_to_messages(
    items: Sequence[InputItem], *, vision: bool, param: str = "input"
) -> list[ChatMessage]:
    """Input items (in context order) -> chat messages.

    Consecutive function calls form one assistant turn with several tool calls; a
    reasoning item is carried on the assistant turn that follows it.
    """
    messages: list[ChatMessage] = []
    reasoning: str | None = None
    for index, item in enumerate(items):
        where = f"{param}[{index}]"
        if isinstance(item, InputMessage):
            text, images = _message_content(item, vision=vision, where=where)
            if item.role == "assistant":
                messages.append(ChatMessage(role="assistant", content=text, reasoning=reasoning))
                reasoning = None
            else:
                messages.append(ChatMessage(role=item.role, content=text, images=images))
        elif isinstance(item, FunctionCallInput | CustomToolCallInput):
            call = _tool_call(item)
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant" and reasoning is None:
                messages[-1] = ChatMessage(
                    role="assistant",
                    content=last.content,
                    tool_calls=(*last.tool_calls, call),
                    reasoning=last.reasoning,
                )
            else:
                messages.append(
                    ChatMessage(role="assistant", tool_calls=(call,), reasoning=reasoning)
                )
                reasoning = None
        elif isinstance(item, FunctionCallOutputInput | CustomToolCallOutputInput):
            output = item.output
            text = output if isinstance(output, str) else _parts_text(output, vision, where)[0]
            messages.append(ChatMessage(role="tool", content=text, tool_call_id=item.call_id))
        elif isinstance(item, ReasoningInput):
            parts = item.content or item.summary
            reasoning = "".join(part.text for part in parts) or reasoning
        elif isinstance(item, ItemReference):
            raise APIError(
                404,
                f"Item with id '{item.id}' not found.",
                param=f"{where}.id",
                code="item_not_found",
            )
    return messages


def _tool_call(item: FunctionCallInput | CustomToolCallInput) -> ToolCall:
    if isinstance(item, FunctionCallInput):
        return ToolCall(call_id=item.call_id, name=item.name, arguments=item.arguments)
    # The model saw a custom tool as a function taking one string, `input`.
    arguments = json.dumps({"input": item.input}, ensure_ascii=False)
    return ToolCall(call_id=item.call_id, name=item.name, arguments=arguments)


def _message_content(
    item: InputMessage, *, vision: bool, where: str
) -> tuple[str, tuple[str, ...]]:
    if isinstance(item.content, str):
        return item.content, ()
    return _parts_text(item.content, vision, f"{where}.content")


def _parts_text(parts: Sequence[Any], vision: bool, where: str) -> tuple[str, tuple[str, ...]]:
    """The parts' text joined, and the URLs of their images (for vision models)."""
    texts: list[str] = []
    images: list[str] = []
    for index, part in enumerate(parts):
        if isinstance(part, InputImage) and not vision:
            raise APIError(
                400,
                "This model has no vision support: it cannot read input_image content. "
                "Send text only, or use a vision-capable model.",
                param=f"{where}[{index}]",
                code="unsupported_content",
            )
        if isinstance(part, InputImage):
            if not part.image_url:
                raise APIError(
                    400,
                    "input_image needs an image_url (a data: or http(s) URL); file_id is not "
                    "supported.",
                    param=f"{where}[{index}].image_url",
                    code="unsupported_content",
                )
            images.append(part.image_url)
        if isinstance(part, InputFile):
            raise APIError(
                400,
                "This model cannot read input_file content; send the file's text as input_text.",
                param=f"{where}[{index}]",
                code="unsupported_content",
            )
        if isinstance(part, RefusalIn):
            texts.append(part.refusal)
        elif hasattr(part, "text"):
            texts.append(part.text)
    return "\n".join(texts), tuple(images)
