"""What clients send to POST /v1/chat/completions (OpenAI's Chat Completions body).

Only the envelope is typed here; messages, tools and response_format stay plain JSON and
are checked one by one where they become a Responses request (api/_chat_wire.py), so an
error names the client's own path (`messages[2].tool_calls[0].function.name`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from respond.protocol._base import WireIn

__all__ = ["ChatBody"]


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
    parallel_tool_calls: bool = True
    response_format: dict[str, Any] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    user: str | None = None
