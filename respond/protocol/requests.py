"""What clients send to POST /v1/responses: the body and its input items."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from respond.protocol._base import Metadata, WireIn

__all__ = [
    "AllowedToolsChoice",
    "CustomToolCallInput",
    "CustomToolCallOutputInput",
    "CompactionInput",
    "CreateResponseBody",
    "FunctionCallInput",
    "FunctionCallOutputInput",
    "FunctionTool",
    "InputImage",
    "InputItem",
    "InputMessage",
    "InputText",
    "ItemReference",
    "McpApprovalRequestInput",
    "McpApprovalResponseInput",
    "McpCallInput",
    "FileSearchCallInput",
    "McpListToolsInput",
    "NamedToolChoice",
    "ReasoningInput",
    "TextFormat",
]


# ---------------------------------------------------------------- content parts


class InputText(WireIn):
    type: Literal["input_text"]
    text: str


class OutputTextIn(WireIn):
    type: Literal["output_text"]
    text: str


class RefusalIn(WireIn):
    type: Literal["refusal"]
    refusal: str


class InputImage(WireIn):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(WireIn):
    type: Literal["input_file"]
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None


class ReasoningTextIn(WireIn):
    type: Literal["reasoning_text", "summary_text"]
    text: str


ContentPart = Annotated[
    InputText | OutputTextIn | RefusalIn | InputImage | InputFile | ReasoningTextIn,
    Field(discriminator="type"),
]


# ---------------------------------------------------------------- items


class InputMessage(WireIn):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    status: str | None = None


class FunctionCallInput(WireIn):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    name: str
    arguments: str
    status: str | None = None


class FunctionCallOutputInput(WireIn):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    output: str | list[ContentPart]
    status: str | None = None


class CustomToolCallInput(WireIn):
    type: Literal["custom_tool_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    name: str
    input: str
    status: str | None = None


class CustomToolCallOutputInput(WireIn):
    type: Literal["custom_tool_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    output: str | list[ContentPart]
    status: str | None = None


class ReasoningInput(WireIn):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[ReasoningTextIn] = Field(default_factory=list)
    content: list[ReasoningTextIn] | None = None
    encrypted_content: str | None = None
    status: str | None = None


class ItemReference(WireIn):
    type: Literal["item_reference"]
    id: str


class CompactionInput(WireIn):
    """A `compaction` item from POST /v1/responses/compact, sent back as context."""

    type: Literal["compaction"]
    id: str | None = None
    encrypted_content: str = Field(min_length=1)


class McpListToolsInput(WireIn):
    type: Literal["mcp_list_tools"]
    id: str | None = None
    server_label: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None


class McpCallInput(WireIn):
    type: Literal["mcp_call"]
    id: str = Field(min_length=1)
    server_label: str
    name: str
    arguments: str = ""
    output: str | None = None
    error: dict[str, Any] | str | None = None
    approval_request_id: str | None = None
    status: str | None = None


class McpApprovalRequestInput(WireIn):
    type: Literal["mcp_approval_request"]
    id: str = Field(min_length=1)
    server_label: str
    name: str
    arguments: str = ""


class McpApprovalResponseInput(WireIn):
    type: Literal["mcp_approval_response"]
    id: str | None = None
    approval_request_id: str = Field(min_length=1)
    approve: bool
    reason: str | None = None


class FileSearchCallInput(WireIn):
    type: Literal["file_search_call"]
    id: str = Field(min_length=1)
    queries: list[str] = Field(default_factory=list)
    results: list[dict[str, Any]] | None = None
    status: str | None = None


def _item_tag(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "message"))
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FunctionCallInput, Tag("function_call")]
    | Annotated[FunctionCallOutputInput, Tag("function_call_output")]
    | Annotated[CustomToolCallInput, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutputInput, Tag("custom_tool_call_output")]
    | Annotated[ReasoningInput, Tag("reasoning")]
    | Annotated[ItemReference, Tag("item_reference")]
    | Annotated[CompactionInput, Tag("compaction")]
    | Annotated[McpListToolsInput, Tag("mcp_list_tools")]
    | Annotated[McpCallInput, Tag("mcp_call")]
    | Annotated[McpApprovalRequestInput, Tag("mcp_approval_request")]
    | Annotated[McpApprovalResponseInput, Tag("mcp_approval_response")]
    | Annotated[FileSearchCallInput, Tag("file_search_call")],
    Discriminator(
        _item_tag,
        custom_error_type="invalid_item_type",
        custom_error_message="Unknown input item type; expected one of message, function_call, "
        "function_call_output, reasoning, item_reference, compaction, mcp_list_tools, mcp_call, "
        "mcp_approval_request, mcp_approval_response, file_search_call",
    ),
]


# ---------------------------------------------------------------- tools


class FunctionTool(WireIn):
    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedToolChoice(WireIn):
    type: Literal["function"]
    name: str


class AllowedToolsChoice(WireIn):
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"] = "auto"
    tools: list[dict[str, Any]]


# ---------------------------------------------------------------- text format


class TextFormatText(WireIn):
    type: Literal["text"]


class TextFormatJsonObject(WireIn):
    type: Literal["json_object"]


class TextFormatJsonSchema(WireIn):
    type: Literal["json_schema"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


TextFormat = Annotated[
    TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")
]


class TextParam(WireIn):
    format: TextFormat = Field(default_factory=lambda: TextFormatText(type="text"))
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningParam(WireIn):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None


class ConversationRef(WireIn):
    id: str


class StreamOptions(WireIn):
    include_obfuscation: bool | None = None


# ---------------------------------------------------------------- the body


class CreateResponseBody(WireIn):
    model: str | None = None
    input: str | list[InputItem] = Field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    include: list[str] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: (
        Literal["auto", "none", "required"] | NamedToolChoice | AllowedToolsChoice | dict[str, Any]
    ) = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = Field(default=None, ge=1)
    text: TextParam = Field(default_factory=TextParam)
    reasoning: ReasoningParam | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    max_output_tokens: int | None = Field(default=None, ge=1)
    truncation: Literal["auto", "disabled"] | None = None
    metadata: Metadata | None = None
    store: bool | None = None
    background: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    safety_identifier: str | None = Field(default=None, max_length=64)
    prompt_cache_key: str | None = None
    user: str | None = None
    seed: int | None = None
    # Extensions beyond the Responses API (llama-server has both): the Messages API maps
    # its top_k and stop_sequences here, and Responses clients may send them too.
    top_k: int | None = Field(default=None, ge=0)
    stop: list[str] = Field(default_factory=list, max_length=16)
