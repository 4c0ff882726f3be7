"""The response object (`object: "response"`) and its parts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from respond.protocol._base import Wire, omit_none
from respond.protocol.items import OutputItem

__all__ = [
    "ErrorInfo",
    "IncompleteDetails",
    "InputTokensDetails",
    "OutputTokensDetails",
    "ReasoningConfig",
    "ResponseResource",
    "ResponseStatus",
    "ResponseUsage",
    "TextConfig",
]

ResponseStatus = Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]
TERMINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})


class InputTokensDetails(Wire):
    cached_tokens: int = 0
    # Not in the Open Responses schema (which allows extra fields), but the openai SDK's
    # types require it. respond bills no prompt-cache writes, so it is always 0.
    cache_write_tokens: int = 0


class OutputTokensDetails(Wire):
    reasoning_tokens: int = 0


class ResponseUsage(Wire):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)


class IncompleteDetails(Wire):
    reason: str


class ErrorInfo(Wire):
    code: str
    message: str


class TextConfig(Wire):
    format: dict[str, Any] = Field(default_factory=lambda: {"type": "text"})
    verbosity: Literal["low", "medium", "high"] | None = omit_none()


class ReasoningConfig(Wire):
    effort: str | None = None
    summary: str | None = None


class ResponseResource(Wire):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    incomplete_details: IncompleteDetails | None = None
    model: str
    previous_response_id: str | None = None
    instructions: str | None = None
    output: list[OutputItem] = Field(default_factory=list)
    error: ErrorInfo | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    truncation: Literal["auto", "disabled"] = "disabled"
    parallel_tool_calls: bool = True
    text: TextConfig = Field(default_factory=TextConfig)
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    top_logprobs: int = 0
    temperature: float = 1.0
    reasoning: ReasoningConfig | None = None
    usage: ResponseUsage | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    store: bool = True
    background: bool = False
    service_tier: str = "default"
    metadata: dict[str, str] = Field(default_factory=dict)
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    user: str | None = omit_none()
    conversation: dict[str, str] | None = omit_none()

    @property
    def output_text(self) -> str:
        from respond.protocol.items import MessageItem, OutputText

        return "".join(
            part.text
            for item in self.output
            if isinstance(item, MessageItem)
            for part in item.content
            if isinstance(part, OutputText)
        )
