"""POST /v1/chat/completions from the same engines, since every local client expects it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import Field

from respond._ids import new_id
from respond.api._common import JSONRoute, sse_frame, tenant_of
from respond.api._docs import ERRORS, SSE
from respond.engines import _base as d
from respond.protocol._base import WireIn
from respond.protocol.errors import APIError
from respond.responses.run import Responses

router = APIRouter(route_class=JSONRoute, tags=["chat"])


class ChatBody(WireIn):
    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] = "auto"
    response_format: dict[str, Any] | None = None


def _check_shape(raw: dict[str, Any], where: str) -> None:
    """Content parts and tool calls are objects (a malformed message is a 400, not a crash)."""
    content = raw.get("content")
    if content is not None and not isinstance(content, str | list):
        raise _malformed(f"{where}.content", "a string or a list of content parts")
    for index, part in enumerate(content if isinstance(content, list) else []):
        if not isinstance(part, dict):
            raise _malformed(f"{where}.content[{index}]", "a content part object")
    calls = raw.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise _malformed(f"{where}.tool_calls", "a list of tool calls")
    for index, call in enumerate(calls or []):
        if not isinstance(call, dict) or not isinstance(call.get("function", {}), dict):
            raise _malformed(f"{where}.tool_calls[{index}]", "a tool call with a function object")


def _malformed(param: str, expected: str) -> APIError:
    return APIError(400, f"Invalid value for '{param}': expected {expected}.", param=param)


def _messages(body: ChatBody, vision: bool) -> list[d.ChatMessage]:
    out: list[d.ChatMessage] = []
    for index, raw in enumerate(body.messages):
        _check_shape(raw, f"messages[{index}]")
        role = raw.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise APIError(400, f"Invalid role {role!r}.", param=f"messages[{index}].role")
        content = raw.get("content") or ""
        images: list[str] = []
        if isinstance(content, list):
            texts = []
            for part_index, part in enumerate(content):
                if part.get("type") == "image_url" and not vision:
                    raise APIError(
                        400,
                        "This model has no vision support: it cannot read image_url content.",
                        param=f"messages[{index}].content[{part_index}]",
                    )
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                if part.get("type") == "image_url":  # passed on to vision upstreams
                    images.append(str((part.get("image_url") or {}).get("url", "")))
            content = "\n".join(texts)
        calls = tuple(
            d.ToolCall(
                call_id=call.get("id", ""),
                name=call.get("function", {}).get("name", ""),
                arguments=call.get("function", {}).get("arguments", ""),
            )
            for call in raw.get("tool_calls") or ()
        )
        out.append(
            d.ChatMessage(
                role=role,
                content=str(content),
                tool_calls=calls,
                tool_call_id=raw.get("tool_call_id"),
                images=tuple(images),
            )
        )
    return out


def _turn(body: ChatBody, engine: d.Engine) -> d.ChatTurn:
    specs = [
        d.FunctionSpec(
            name=t["function"]["name"],
            description=t["function"].get("description"),
            parameters=t["function"].get("parameters") or {"type": "object", "properties": {}},
            strict=bool(t["function"].get("strict", False)),
        )
        for t in body.tools
        if t.get("type") == "function" and "function" in t
    ]
    choice = body.tool_choice
    if isinstance(choice, dict):
        tool_choice = d.ToolChoice(
            mode="required", allowed=(choice.get("function", {}).get("name", ""),)
        )
    else:
        tool_choice = d.ToolChoice(mode=choice)
    fmt = body.response_format or {}
    schema = fmt.get("json_schema", {}).get("schema") if fmt.get("type") == "json_schema" else None
    return d.ChatTurn(
        model=engine.info.id,
        messages=_messages(body, engine.info.vision),
        tools=specs,
        tool_choice=tool_choice,
        json_schema=schema,
        json_object=fmt.get("type") == "json_object",
        sampling=d.Sampling(
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            presence_penalty=body.presence_penalty or 0.0,
            frequency_penalty=body.frequency_penalty or 0.0,
            seed=body.seed,
        ),
        max_output_tokens=body.max_completion_tokens or body.max_tokens,
    )


@router.post(
    "/v1/chat/completions",
    responses={200: {"content": SSE, "description": "A chat.completion, or chunks"}, **ERRORS},
)
async def chat_completions(request: Request, body: ChatBody) -> Response:
    """Chat Completions from the same engines (JSON, or SSE chunks with `stream: true`)."""
    tenant_of(request)
    service: Responses = request.app.state.responses
    engine = service.engine_for(body.model)
    request.state.model = engine.info.id  # for the access log and /metrics
    if not engine.ready:
        raise APIError(503, "The model is still loading; retry shortly.", code="model_loading")
    turn = _turn(body, engine)
    head = {"id": new_id("chatcmpl"), "created": int(time.time()), "model": engine.info.id}
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        return StreamingResponse(
            _chunks(engine, turn, head, include_usage), media_type="text/event-stream"
        )
    text, usage, finish = "", None, "stop"
    calls: list[dict[str, Any]] = []
    try:
        async with aclosing(engine.stream(turn)) as deltas:
            async for delta in deltas:
                if isinstance(delta, d.TextDelta):
                    text += delta.text
                elif isinstance(delta, d.ToolCallStart):
                    calls.append(
                        {
                            "id": delta.call_id,
                            "type": "function",
                            "function": {"name": delta.name, "arguments": ""},
                        }
                    )
                elif isinstance(delta, d.ToolCallArgumentsDelta):
                    calls[-1]["function"]["arguments"] += delta.arguments
                elif isinstance(delta, d.Usage):
                    usage = delta
                elif isinstance(delta, d.Finish):
                    finish = "length" if delta.reason == "length" else finish
    except d.EngineError as exc:
        raise APIError(exc.status, exc.message, code=exc.code) from exc
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
        finish = "tool_calls" if finish == "stop" else finish
    return JSONResponse(
        {
            **head,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": _usage(usage),
        }
    )


def _usage(usage: d.Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


async def _chunks(
    engine: d.Engine, turn: d.ChatTurn, head: dict[str, Any], include_usage: bool
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return sse_frame({**head, "object": "chat.completion.chunk", "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    usage: d.Usage | None = None
    finish = "stop"
    calls = -1
    try:
        async with aclosing(engine.stream(turn)) as deltas:
            async for delta in deltas:
                if isinstance(delta, d.TextDelta):
                    yield chunk({"content": delta.text})
                elif isinstance(delta, d.ToolCallStart):
                    calls += 1
                    call = {
                        "index": calls,
                        "id": delta.call_id,
                        "type": "function",
                        "function": {"name": delta.name, "arguments": ""},
                    }
                    yield chunk({"tool_calls": [call]})
                elif isinstance(delta, d.ToolCallArgumentsDelta):
                    yield chunk(
                        {
                            "tool_calls": [
                                {"index": calls, "function": {"arguments": delta.arguments}}
                            ]
                        }
                    )
                elif isinstance(delta, d.Usage):
                    usage = delta
                elif isinstance(delta, d.Finish) and delta.reason == "length":
                    finish = "length"
    except d.EngineError as exc:
        yield sse_frame(
            {
                "error": {
                    "message": exc.message,
                    "type": "server_error",
                    "param": None,
                    "code": exc.code,
                }
            }
        )
        yield b"data: [DONE]\n\n"
        return
    if calls >= 0 and finish == "stop":
        finish = "tool_calls"
    yield chunk({}, finish)
    if include_usage:
        yield sse_frame(
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": _usage(usage)}
        )
    yield b"data: [DONE]\n\n"


__all__ = ["router"]
