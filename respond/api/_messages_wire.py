"""The Anthropic Messages API as a thin translator over the one run.

In: a Messages request becomes the CreateResponseBody the run already knows (system ->
instructions, content blocks -> input items, tools -> function tools, thinking -> reasoning
effort, stop_sequences -> stop). Out: the run's events become Messages stream events one by
one (`MessageStream`), and its final response becomes the Message (`message_of`), so the
Message is exactly what the events said. Nothing here folds engine deltas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from respond.engines import Engine, UnsupportedSchemaError
from respond.protocol import events as ev
from respond.protocol import messages as m
from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.items import FunctionCallItem, MessageItem, OutputItem, ReasoningItem
from respond.protocol.requests import CreateResponseBody
from respond.protocol.resource import ResponseResource
from respond.responses.run import PreparedRun
from respond.responses.sealing import ENCRYPTED_INCLUDE, Sealer

__all__ = ["MessageStream", "error_type", "message_id", "message_of", "request_body"]

# Anthropic's server tools are typed `web_search_20250305`, `bash_20250124`, ...; tools
# the client runs itself have no type, or `custom`.
_CLIENT_TOOL_TYPES = (None, "custom")


# ---------------------------------------------------------------- in: request -> run body


def request_body(body: m.CountTokensBody, *, engine: Engine, sealer: Sealer) -> CreateResponseBody:
    """The Responses body for a Messages (or count_tokens) request."""
    messages = _clear_thinking(body.messages, body.context_management)
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        items += _items(message, f"messages.{index}", vision=engine.info.vision, sealer=sealer)
    data: dict[str, Any] = {
        "model": body.model,
        "input": items,
        "instructions": _system(body.system),
        "tools": [_tool(tool, f"tools.{i}", engine) for i, tool in enumerate(body.tools)],
        "store": False,  # the Messages API is stateless
        # Reasoning is sealed on the way out: the thinking block's signature.
        "include": [ENCRYPTED_INCLUDE],
        **_tool_choice(body.tool_choice),
    }
    effort = _effort(body.thinking, body.output_config)
    if effort is not None:
        data["reasoning"] = {"effort": effort}
    if isinstance(body, m.MessagesBody):
        data.update(
            max_output_tokens=body.max_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            top_k=body.top_k,
            stop=body.stop_sequences,
        )
    try:
        return CreateResponseBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, data) from exc


def _system(system: str | list[m.TextBlockIn] | None) -> str | None:
    if isinstance(system, list):
        return "\n\n".join(block.text for block in system) or None
    return system or None


def _items(
    message: m.MessageParam, where: str, *, vision: bool, sealer: Sealer
) -> list[dict[str, Any]]:
    """One message's content blocks as input items, in order."""
    if isinstance(message.content, str):
        return [{"type": "message", "role": message.role, "content": message.content}]
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []  # text and images waiting to form a message item

    def flush() -> None:
        if parts:
            items.append({"type": "message", "role": message.role, "content": list(parts)})
            parts.clear()

    text_part = "output_text" if message.role == "assistant" else "input_text"
    for index, block in enumerate(message.content):
        at = f"{where}.content.{index}"
        if isinstance(block, m.TextBlockIn):
            parts.append({"type": text_part, "text": block.text})
        elif isinstance(block, m.ImageBlockIn | m.DocumentBlockIn) and message.role == "user":
            parts.append(_media(block, at, vision))
        elif isinstance(block, m.ToolResultBlockIn) and message.role == "user":
            flush()
            items.append(_tool_result(block, at, vision))
        elif isinstance(block, m.ToolUseBlockIn) and message.role == "assistant":
            flush()
            arguments = json.dumps(block.input, ensure_ascii=False)
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": arguments,
                }
            )
        elif isinstance(block, m.ThinkingBlockIn | m.RedactedThinkingBlockIn) and (
            message.role == "assistant"
        ):
            flush()
            items.append(_thinking(block, at, sealer))
        else:
            raise APIError(
                400, f"{at}: a '{block.type}' block cannot be in a {message.role} message."
            )
    flush()
    return items


def _media(block: m.ImageBlockIn | m.DocumentBlockIn, at: str, vision: bool) -> dict[str, Any]:
    source = block.source
    if isinstance(block, m.DocumentBlockIn):
        if source.get("type") == "text":  # a plain-text document: any model reads it
            return {"type": "input_text", "text": str(source.get("data", ""))}
        raise APIError(
            400,
            f"{at}: this model cannot read '{source.get('type')}' documents; send the "
            "document's text as a text block (or a document with a text source).",
        )
    if not vision:
        raise APIError(
            400,
            f"{at}: this model has no vision support: it cannot read image content. "
            "Send text only, or use a vision-capable model.",
        )
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
    elif source.get("type") == "url":
        url = str(source.get("url", ""))
    else:
        raise APIError(400, f"{at}.source: image sources are 'base64' or 'url'.")
    return {"type": "input_image", "image_url": url}


def _tool_result(block: m.ToolResultBlockIn, at: str, vision: bool) -> dict[str, Any]:
    content = block.content
    output: str | list[dict[str, Any]]
    if isinstance(content, str):
        output = content
    else:
        parts = [
            {"type": "input_text", "text": part.text}
            if isinstance(part, m.TextBlockIn)
            else _media(part, f"{at}.content.{i}", vision)
            for i, part in enumerate(content)
        ]
        texts_only = all(part["type"] == "input_text" for part in parts)
        output = "\n".join(part["text"] for part in parts) if texts_only else parts
    if block.is_error and isinstance(output, str):
        output = f"Error: {output}"  # chat templates have no error flag on tool results
    return {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}


def _thinking(
    block: m.ThinkingBlockIn | m.RedactedThinkingBlockIn, at: str, sealer: Sealer
) -> dict[str, Any]:
    """A thinking block carries its text sealed in its signature (redacted: in `data`);
    the sealed text is what the model sees again, so it must open."""
    sealed = block.signature if isinstance(block, m.ThinkingBlockIn) else block.data
    try:
        sealer.unseal(sealed)
    except ValueError as exc:
        field = "signature" if isinstance(block, m.ThinkingBlockIn) else "data"
        raise APIError(
            400,
            f"{at}.{field}: invalid signature in {block.type} block: it was changed, or "
            "signed by another server.",
        ) from exc
    return {"type": "reasoning", "summary": [], "encrypted_content": sealed}


def _clear_thinking(
    messages: Sequence[m.MessageParam], management: dict[str, Any] | None
) -> list[m.MessageParam]:
    """Apply a `clear_thinking_*` context edit: thinking is dropped from all but the last
    `keep` assistant turns that have some (default 1; "all" keeps everything)."""
    edits = (management or {}).get("edits") or []
    edit = next((e for e in edits if str(e.get("type", "")).startswith("clear_thinking")), None)
    if edit is None:
        return list(messages)
    keep_spec = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep_spec == "all":
        return list(messages)
    keep = int(keep_spec.get("value", 1)) if isinstance(keep_spec, dict) else 1
    thinking = (m.ThinkingBlockIn, m.RedactedThinkingBlockIn)
    turns = [
        i
        for i, msg in enumerate(messages)
        if isinstance(msg.content, list) and any(isinstance(b, thinking) for b in msg.content)
    ]
    clear = set(turns[: max(len(turns) - keep, 0)])
    out: list[m.MessageParam] = []
    for i, msg in enumerate(messages):
        if i in clear and isinstance(msg.content, list):
            kept = [b for b in msg.content if not isinstance(b, thinking)]
            msg = msg.model_copy(update={"content": kept})
        out.append(msg)
    return out


def _tool(tool: dict[str, Any], where: str, engine: Engine) -> dict[str, Any]:
    kind = tool.get("type")
    if kind not in _CLIENT_TOOL_TYPES:
        raise APIError(
            400,
            f"{where}.type: '{kind}' is an Anthropic server tool, which respond does not run. "
            "Define it as a custom tool (name, description, input_schema) and run it yourself.",
        )
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise APIError(400, f"{where}.input_schema: Field required (a JSON Schema object).")
    return {
        "type": "function",
        "name": tool.get("name"),
        "description": tool.get("description"),
        "parameters": schema,
        # Arguments are valid by grammar wherever the engine can enforce the schema; a
        # tool that asks for strict gets a 400 where it cannot.
        "strict": tool.get("strict") is True or _enforceable(engine, schema),
    }


def _enforceable(engine: Engine, schema: dict[str, Any]) -> bool:
    try:
        engine.check_schema(schema)
    except UnsupportedSchemaError:
        return False
    return True


def _tool_choice(choice: m.ToolChoice | None) -> dict[str, Any]:
    if choice is None or isinstance(choice, m.ToolChoiceAuto):
        parallel = not (choice and choice.disable_parallel_tool_use)
        return {"tool_choice": "auto", "parallel_tool_calls": parallel}
    if isinstance(choice, m.ToolChoiceNone):
        return {"tool_choice": "none"}
    parallel = not choice.disable_parallel_tool_use
    if isinstance(choice, m.ToolChoiceAny):
        return {"tool_choice": "required", "parallel_tool_calls": parallel}
    return {
        "tool_choice": {"type": "function", "name": choice.name},
        "parallel_tool_calls": parallel,
    }


_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}


def _effort(thinking: m.ThinkingConfig | None, output: m.OutputConfig | None) -> str | None:
    """Thinking as a reasoning effort. No `thinking` at all leaves the model's default."""
    if isinstance(thinking, m.ThinkingDisabled):
        return "none"
    if output is not None and output.effort is not None:
        return _EFFORTS[output.effort]
    if isinstance(thinking, m.ThinkingEnabled):
        budget = thinking.budget_tokens
        return "low" if budget <= 4096 else "medium" if budget <= 16384 else "high"
    return None


# ---------------------------------------------------------------- out: run -> Message


def message_id(run: PreparedRun) -> str:
    return "msg_" + run.resource.id.removeprefix("resp_")


def tool_use_id(call_id: str) -> str:
    return call_id if call_id.startswith("toolu_") else "toolu_" + call_id.removeprefix("call_")


def message_of(response: ResponseResource, run: PreparedRun) -> m.Message:
    """The Message for a finished run: its final response, block for output item."""
    return m.Message(
        id=message_id(run),
        model=response.model,
        content=[_block(item) for item in response.output],
        stop_reason=_stop_reason(response, run),
        stop_sequence=run.stop_sequence,
        usage=m.MessageUsage(**_usage(response)),
    )


def _block(item: OutputItem) -> m.ContentBlock:
    if isinstance(item, ReasoningItem):
        text = "".join(part.text for part in item.content)
        return m.ThinkingBlock(thinking=text, signature=item.encrypted_content or "")
    if isinstance(item, FunctionCallItem):
        return m.ToolUseBlock(id=tool_use_id(item.call_id), name=item.name, input=_input(item))
    assert isinstance(item, MessageItem), f"no Messages block for a {item.type} item"
    return m.TextBlock(text="".join(getattr(part, "text", "") for part in item.content))


def _input(item: FunctionCallItem) -> dict[str, Any]:
    try:
        value = json.loads(item.arguments or "{}")
    except ValueError:
        return {}  # cut short by max_tokens: the stop_reason says so
    return value if isinstance(value, dict) else {}


def _stop_reason(response: ResponseResource, run: PreparedRun) -> m.StopReason:
    if run.stop_sequence is not None:
        return "stop_sequence"
    if response.status == "incomplete":
        return "max_tokens"
    if any(isinstance(item, FunctionCallItem) for item in response.output):
        return "tool_use"
    return "end_turn"


def _usage(response: ResponseResource) -> dict[str, int]:
    usage = response.usage
    if usage is None:
        return {}
    cached = usage.input_tokens_details.cached_tokens
    # Anthropic's input_tokens leave out what was read from the cache.
    return {
        "input_tokens": usage.input_tokens - cached,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": cached,
    }


_ERROR_TYPES: dict[int, m.ErrorType] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_type(status: int) -> m.ErrorType:
    """Anthropic's error type for an HTTP status."""
    return _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


class MessageStream:
    """One run's events as Messages stream events. A content block's index is its output
    item's index: every item is one block."""

    def __init__(self, run: PreparedRun) -> None:
        self._run = run

    def translate(self, event: ev.Event) -> list[m.StreamEvent]:
        if isinstance(event, ev.ResponseCreated):
            start = m.Message(id=message_id(self._run), model=event.response.model)
            return [m.MessageStart(message=start), m.Ping()]
        if isinstance(event, ev.OutputItemAdded):
            return [
                m.ContentBlockStart(index=event.output_index, content_block=_opened(event.item))
            ]
        if isinstance(event, ev.OutputItemDone):
            return self._closed(event)
        if isinstance(event, ev.ResponseCompleted | ev.ResponseIncomplete):
            return self._ended(event.response)
        if isinstance(event, ev.ResponseFailed):
            return self._failed(event.response)
        delta = _delta(event)
        if delta is None:
            return []
        index, body = delta
        return [m.ContentBlockDelta(index=index, delta=body)]

    def _closed(self, event: ev.OutputItemDone) -> list[m.StreamEvent]:
        out: list[m.StreamEvent] = []
        item = event.item
        if isinstance(item, ReasoningItem) and item.encrypted_content:
            signature = m.SignatureDelta(signature=item.encrypted_content)
            out.append(m.ContentBlockDelta(index=event.output_index, delta=signature))
        out.append(m.ContentBlockStop(index=event.output_index))
        return out

    def _ended(self, response: ResponseResource) -> list[m.StreamEvent]:
        delta = m.MessageDeltaBody(
            stop_reason=_stop_reason(response, self._run), stop_sequence=self._run.stop_sequence
        )
        usage = m.MessageDeltaUsage(**_usage(response))
        return [m.MessageDelta(delta=delta, usage=usage), m.MessageStop()]

    def _failed(self, response: ResponseResource) -> list[m.StreamEvent]:
        error = response.error
        message = error.message if error else f"The response ended {response.status}."
        kind = error_type(self._run.failure_status)
        return [m.MessagesError(error=m.MessagesErrorDetail(type=kind, message=message))]


def _opened(item: OutputItem) -> m.ContentBlock:
    if isinstance(item, ReasoningItem):
        return m.ThinkingBlock()
    if isinstance(item, FunctionCallItem):
        return m.ToolUseBlock(id=tool_use_id(item.call_id), name=item.name)
    return m.TextBlock()


def _delta(event: ev.Event) -> tuple[int, m.BlockDelta] | None:
    """(block index, delta) for the events that add to a block; None for the rest."""
    if isinstance(event, ev.OutputTextDelta):
        return event.output_index, m.TextDelta(text=event.delta)
    if isinstance(event, ev.ReasoningDelta):
        return event.output_index, m.ThinkingDelta(thinking=event.delta)
    if isinstance(event, ev.FunctionCallArgumentsDelta):
        return event.output_index, m.InputJsonDelta(partial_json=event.delta)
    return None
