"""Turn Responses input items into the chat messages an engine sees."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from respond._ids import new_id
from respond.engines._base import ChatMessage, ToolCall
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FileSearchCallInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputFile,
    InputImage,
    InputItem,
    InputMessage,
    ItemReference,
    McpApprovalRequestInput,
    McpApprovalResponseInput,
    McpCallInput,
    McpListToolsInput,
    ReasoningInput,
    RefusalIn,
)

__all__ = [
    "items_to_messages",
    "mcp_result_text",
    "normalize_input",
    "search_results_text",
    "stored_item",
]

_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "mcp_approval_response": "mcpa",
}

# (server_label, tool name) -> the function name the model sees for that MCP tool.
McpNames = Callable[[str, str], str]


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
    items: Sequence[InputItem],
    *,
    vision: bool,
    param: str = "input",
    mcp_names: McpNames | None = None,
) -> list[ChatMessage]:
    """Input items (in context order) -> chat messages.

    Consecutive function calls form one assistant turn with several tool calls; a
    reasoning item is carried on the assistant turn that follows it. MCP calls replay as
    the function calls the model made (named by `mcp_names`) and their results.
    """
    messages: list[ChatMessage] = []
    reasoning: str | None = None
    mcp = _McpReplay(mcp_names or (lambda _label, name: name))
    for index, item in enumerate(items):
        where = f"{param}[{index}]"
        if isinstance(item, McpListToolsInput):
            continue  # what the model sees of a listing is its tools, not a message
        if isinstance(item, McpCallInput | McpApprovalRequestInput | McpApprovalResponseInput):
            for message in mcp.messages(item):
                _append_assistant_call(messages, message, reasoning)
                reasoning = None if message.role == "assistant" else reasoning
            continue
        if isinstance(item, InputMessage):
            messages += mcp.unanswered()
            text, images = _message_content(item, vision=vision, where=where)
            if item.role == "assistant":
                messages.append(ChatMessage(role="assistant", content=text, reasoning=reasoning))
                reasoning = None
            else:
                messages.append(ChatMessage(role=item.role, content=text, images=images))
        elif isinstance(item, FileSearchCallInput):
            for message in _search_messages(item):
                _append_assistant_call(messages, message, reasoning)
            reasoning = None
        elif isinstance(item, FunctionCallInput | CustomToolCallInput):
            call = ChatMessage(role="assistant", tool_calls=(_tool_call(item),))
            _append_assistant_call(messages, call, reasoning)
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


def _append_assistant_call(
    messages: list[ChatMessage], message: ChatMessage, reasoning: str | None
) -> None:
    """Add a tool call to the assistant turn before it (one turn, several calls), or a
    tool result as its own message."""
    last = messages[-1] if messages else None
    if message.role != "assistant":
        messages.append(message)
    elif last is not None and last.role == "assistant" and reasoning is None:
        messages[-1] = ChatMessage(
            role="assistant",
            content=last.content,
            tool_calls=(*last.tool_calls, *message.tool_calls),
            reasoning=last.reasoning,
        )
    else:
        messages.append(
            ChatMessage(role="assistant", tool_calls=message.tool_calls, reasoning=reasoning)
        )


class _McpReplay:
    """MCP items as the chat the model had: each call (or approval request) is an assistant
    tool call; its output, error or refusal is the tool result that answers it."""

    def __init__(self, names: McpNames) -> None:
        self.names = names
        self.waiting: dict[str, str] = {}  # approval request id -> tool, not yet answered
        self.approved: set[str] = set()  # approved requests: their mcp_call answers them

    def messages(
        self, item: McpCallInput | McpApprovalRequestInput | McpApprovalResponseInput
    ) -> list[ChatMessage]:
        if isinstance(item, McpApprovalRequestInput):
            self.waiting[item.id] = item.name
            return [self._call(item.id, item.server_label, item.name, item.arguments)]
        if isinstance(item, McpApprovalResponseInput):
            if self.waiting.pop(item.approval_request_id, None) is None:
                return []
            if item.approve:
                self.approved.add(item.approval_request_id)
                return []  # the mcp_call that ran it (or runs it now) answers it
            reason = f" Reason: {item.reason}" if item.reason else ""
            text = f"The user refused this call; it was not run.{reason}"
            return [ChatMessage(role="tool", content=text, tool_call_id=item.approval_request_id)]
        result = ChatMessage(
            role="tool", content=mcp_result_text(item.output, item.error), tool_call_id=item.id
        )
        request = item.approval_request_id
        if request is not None and request in self.approved:
            self.approved.discard(request)
            return [ChatMessage(role="tool", content=result.content, tool_call_id=request)]
        return [self._call(item.id, item.server_label, item.name, item.arguments), result]

    def unanswered(self) -> list[ChatMessage]:
        """Requests left unanswered when the conversation moved on: never run."""
        out = [
            ChatMessage(
                role="tool",
                content="This call was not approved; it was not run.",
                tool_call_id=request_id,
            )
            for request_id in self.waiting
        ]
        self.waiting.clear()
        return out

    def _call(self, call_id: str, label: str, name: str, arguments: str) -> ChatMessage:
        call = ToolCall(call_id=call_id, name=self.names(label, name), arguments=arguments)
        return ChatMessage(role="assistant", tool_calls=(call,))


def mcp_result_text(output: str | None, error: Any) -> str:
    """What the model reads of an MCP call: its output, or what went wrong."""
    if error is None:
        return output or ""
    if isinstance(error, dict):
        content = error.get("content")
        texts = [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]
        message = " ".join(texts) or str(error.get("message", ""))
    else:
        message = str(error)
    return f"Error: {message or 'the call failed'}"


def _search_messages(item: FileSearchCallInput) -> list[ChatMessage]:
    """A file_search call as the model made it (the `file_search` function) and its result:
    the chunks, numbered, when the item kept them (`include: ["file_search_call.results"]`)."""
    arguments = json.dumps({"queries": item.queries}, ensure_ascii=False)
    call = ToolCall(call_id=item.id, name="file_search", arguments=arguments)
    if item.results is None:
        text = "(The results of this search were not kept.)"
    else:
        text = search_results_text(item.results)
    return [
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", content=text, tool_call_id=item.id),
    ]


def search_results_text(results: Sequence[dict[str, Any]]) -> str:
    """A file search's chunks as the model reads them: numbered, each with its file's name."""
    if not results:
        return "No results found in the files."
    return "\n\n".join(
        f"[{n}] {r.get('filename', '')}\n{r.get('text', '')}"
        for n, r in enumerate(results, start=1)
    )


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
