"""The Anthropic Messages API on the wire: what clients send to POST /v1/messages, and the
Message, stream events and errors respond answers with. One small class per `type`.

Only the shapes live here; respond/api/_messages_wire.py translates them to and from the
one run (respond/responses/run.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from respond.protocol._base import Wire, WireIn, omit_none

__all__ = [
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "CountTokensBody",
    "MessagesError",
    "MessagesErrorDetail",
    "InputJsonDelta",
    "Message",
    "MessageDelta",
    "MessageDeltaBody",
    "MessageDeltaUsage",
    "MessageParam",
    "MessageStart",
    "MessageStop",
    "MessageUsage",
    "MessagesBody",
    "Ping",
    "SignatureDelta",
    "StreamEvent",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "TokenCount",
    "ToolUseBlock",
]


# ---------------------------------------------------------------- request content blocks


class TextBlockIn(WireIn):
    type: Literal["text"]
    text: str


class ImageBlockIn(WireIn):
    type: Literal["image"]
    source: dict[str, Any]


class DocumentBlockIn(WireIn):
    type: Literal["document"]
    source: dict[str, Any]


class ToolUseBlockIn(WireIn):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str
    input: dict[str, Any]


class ToolResultBlockIn(WireIn):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: (
        str
        | list[Annotated[TextBlockIn | ImageBlockIn | DocumentBlockIn, Field(discriminator="type")]]
    ) = ""
    is_error: bool = False


class ThinkingBlockIn(WireIn):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlockIn(WireIn):
    type: Literal["redacted_thinking"]
    data: str


ContentBlockIn = Annotated[
    TextBlockIn
    | ImageBlockIn
    | DocumentBlockIn
    | ToolUseBlockIn
    | ToolResultBlockIn
    | ThinkingBlockIn
    | RedactedThinkingBlockIn,
    Field(discriminator="type"),
]


class MessageParam(WireIn):
    # Claude Code sends its environment as a `system` message inside `messages`.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlockIn]


# ---------------------------------------------------------------- request options


class ToolChoiceAuto(WireIn):
    type: Literal["auto"]
    disable_parallel_tool_use: bool = False


class ToolChoiceAny(WireIn):
    type: Literal["any"]
    disable_parallel_tool_use: bool = False


class ToolChoiceTool(WireIn):
    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: bool = False


class ToolChoiceNone(WireIn):
    type: Literal["none"]


ToolChoice = Annotated[
    ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone, Field(discriminator="type")
]


class ThinkingEnabled(WireIn):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1)


class ThinkingDisabled(WireIn):
    type: Literal["disabled"]


class ThinkingAdaptive(WireIn):
    type: Literal["adaptive"]


ThinkingConfig = Annotated[
    ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive, Field(discriminator="type")
]


class OutputConfig(WireIn):
    effort: Literal["low", "medium", "high", "max"] | None = None


class Metadata(WireIn):
    user_id: str | None = Field(default=None, max_length=256)


class CountTokensBody(WireIn):
    """POST /v1/messages/count_tokens: a Messages request without max_tokens."""

    model: str | None = None
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[TextBlockIn] | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None
    context_management: dict[str, Any] | None = None


class MessagesBody(CountTokensBody):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    stop_sequences: list[str] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    service_tier: Literal["auto", "standard_only"] | None = None


# ---------------------------------------------------------------- the Message


class TextBlock(Wire):
    type: Literal["text"] = "text"
    text: str = ""


class ThinkingBlock(Wire):
    type: Literal["thinking"] = "thinking"
    thinking: str = ""
    signature: str = ""


class ToolUseBlock(Wire):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


ContentBlock = Annotated[TextBlock | ThinkingBlock | ToolUseBlock, Field(discriminator="type")]

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class MessageUsage(Wire):
    # Anthropic counts prompt tokens read from the cache apart from input_tokens.
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class Message(Wire):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: MessageUsage = Field(default_factory=MessageUsage)


# ---------------------------------------------------------------- stream events


class MessageStart(Wire):
    type: Literal["message_start"] = "message_start"
    message: Message


class ContentBlockStart(Wire):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ContentBlock


class Ping(Wire):
    type: Literal["ping"] = "ping"


class TextDelta(Wire):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJsonDelta(Wire):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ThinkingDelta(Wire):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class SignatureDelta(Wire):
    type: Literal["signature_delta"] = "signature_delta"
    signature: str


BlockDelta = Annotated[
    TextDelta | InputJsonDelta | ThinkingDelta | SignatureDelta, Field(discriminator="type")
]


class ContentBlockDelta(Wire):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: BlockDelta


class ContentBlockStop(Wire):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDeltaBody(Wire):
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None


class MessageDeltaUsage(Wire):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class MessageDelta(Wire):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDeltaBody
    usage: MessageDeltaUsage


class MessageStop(Wire):
    type: Literal["message_stop"] = "message_stop"


ErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
]


class MessagesErrorDetail(Wire):
    type: ErrorType
    message: str


class TokenCount(Wire):
    """The answer to POST /v1/messages/count_tokens."""

    input_tokens: int


class MessagesError(Wire):
    """The error envelope, as a JSON body and as the `error` stream event."""

    type: Literal["error"] = "error"
    error: MessagesErrorDetail
    request_id: str | None = omit_none()


StreamEvent = (
    MessageStart
    | ContentBlockStart
    | Ping
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | MessagesError
)
