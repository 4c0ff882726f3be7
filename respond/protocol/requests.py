"""What clients send to POST /v1/responses: the body and its input items."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from respond.protocol._base import Metadata, WireIn
from respond.protocol.tools import Tool

__all__ = [
    "ContextManagement",
    "ApplyPatchCallInput",
    "ApplyPatchCallOutputInput",
    "LocalShellCallInput",
    "LocalShellCallOutputInput",
    "ShellCallInput",
    "ShellCallOutputInput",
    "ComputerCallInput",
    "ComputerCallOutputInput",
    "ComputerScreenshot",
    "ToolSearchCallInput",
    "ToolSearchOutputInput",
    "AllowedToolsChoice",
    "CustomToolCallInput",
    "CustomToolCallOutputInput",
    "CompactionInput",
    "CreateResponseBody",
    "FunctionCallInput",
    "FunctionCallOutputInput",
    "InputImage",
    "InputItem",
    "InputMessage",
    "InputText",
    "ItemReference",
    "McpApprovalRequestInput",
    "McpApprovalResponseInput",
    "McpCallInput",
    "FileSearchCallInput",
    "CodeInterpreterCallInput",
    "WebSearchCallInput",
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
    namespace: str | None = None
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
    namespace: str | None = None
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


class CodeInterpreterCallInput(WireIn):
    type: Literal["code_interpreter_call"]
    id: str = Field(min_length=1)
    code: str | None = None
    container_id: str = Field(min_length=1)
    outputs: list[dict[str, Any]] | None = None
    status: str | None = None


class WebSearchCallInput(WireIn):
    type: Literal["web_search_call"]
    id: str = Field(min_length=1)
    action: dict[str, Any] | None = None
    status: str | None = None


class ShellCallInput(WireIn):
    type: Literal["shell_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    action: dict[str, Any]
    status: str | None = None


class ShellCallOutputInput(WireIn):
    type: Literal["shell_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    # [{"stdout", "stderr", "outcome": {"type": "exit", "exit_code"} | {"type": "timeout"}}]
    output: list[dict[str, Any]]
    status: str | None = None


class LocalShellCallInput(WireIn):
    type: Literal["local_shell_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    action: dict[str, Any]
    status: str | None = None


class LocalShellCallOutputInput(WireIn):
    """`id` names the call it answers (its call_id), as OpenAI's type has it."""

    type: Literal["local_shell_call_output"]
    id: str = Field(min_length=1)
    output: str
    status: str | None = None


class ApplyPatchCallInput(WireIn):
    type: Literal["apply_patch_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    operation: dict[str, Any]
    status: str | None = None


class ApplyPatchCallOutputInput(WireIn):
    type: Literal["apply_patch_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    status: Literal["completed", "failed"]
    output: str | None = None


class ComputerCallInput(WireIn):
    """One action (computer_use_preview's `action`) or a batch (the GA tool's `actions`)."""

    type: Literal["computer_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    action: dict[str, Any] | None = None
    actions: list[dict[str, Any]] | None = Field(default=None, min_length=1)
    pending_safety_checks: list[dict[str, Any]] = Field(default_factory=list)
    status: str | None = None

    @model_validator(mode="after")
    def _one_of_them(self) -> ComputerCallInput:
        if (self.action is None) == (self.actions is None):
            raise ValueError(
                "a computer_call carries `action` (computer_use_preview) or `actions` "
                "(the computer tool): one of them"
            )
        return self


class ComputerScreenshot(WireIn):
    type: Literal["computer_screenshot"]
    image_url: str | None = None
    file_id: str | None = None


class ComputerCallOutputInput(WireIn):
    type: Literal["computer_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    output: ComputerScreenshot
    acknowledged_safety_checks: list[dict[str, Any]] | None = None
    status: str | None = None


class ToolSearchCallInput(WireIn):
    """A search for deferred tools: the client's (`execution: "client"`, with a call_id)
    or one respond ran (no call_id)."""

    type: Literal["tool_search_call"]
    id: str | None = None
    call_id: str | None = None
    arguments: Any = None
    execution: Literal["server", "client"] = "server"
    status: str | None = None


class ToolSearchOutputInput(WireIn):
    """The tools a search loaded: shown to the model from then on (responses/deferred.py)."""

    type: Literal["tool_search_output"]
    id: str | None = None
    call_id: str | None = None
    execution: Literal["server", "client"] = "server"
    tools: list[Tool]
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
    | Annotated[FileSearchCallInput, Tag("file_search_call")]
    | Annotated[CodeInterpreterCallInput, Tag("code_interpreter_call")]
    | Annotated[WebSearchCallInput, Tag("web_search_call")]
    | Annotated[ShellCallInput, Tag("shell_call")]
    | Annotated[ShellCallOutputInput, Tag("shell_call_output")]
    | Annotated[LocalShellCallInput, Tag("local_shell_call")]
    | Annotated[LocalShellCallOutputInput, Tag("local_shell_call_output")]
    | Annotated[ApplyPatchCallInput, Tag("apply_patch_call")]
    | Annotated[ApplyPatchCallOutputInput, Tag("apply_patch_call_output")]
    | Annotated[ComputerCallInput, Tag("computer_call")]
    | Annotated[ComputerCallOutputInput, Tag("computer_call_output")]
    | Annotated[ToolSearchCallInput, Tag("tool_search_call")]
    | Annotated[ToolSearchOutputInput, Tag("tool_search_output")],
    Discriminator(
        _item_tag,
        custom_error_type="invalid_item_type",
        custom_error_message="Unknown input item type; expected one of message, function_call, "
        "function_call_output, reasoning, item_reference, compaction, mcp_list_tools, mcp_call, "
        "mcp_approval_request, mcp_approval_response, file_search_call, code_interpreter_call, "
        "web_search_call, shell_call, "
        "shell_call_output, local_shell_call, local_shell_call_output, apply_patch_call, "
        "apply_patch_call_output, computer_call, computer_call_output, tool_search_call, "
        "tool_search_output",
    ),
]


# ---------------------------------------------------------------- tools


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


class ContextManagement(WireIn):
    """A `context_management` entry: OpenAI's only type is server-side compaction once the
    input passes `compact_threshold` tokens."""

    type: Literal["compaction"]
    compact_threshold: int | None = Field(default=None, ge=1)


class CreateResponseBody(WireIn):
    model: str | None = None
    input: str | list[InputItem] = Field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    include: list[str] = Field(default_factory=list)
    tools: list[Tool] = Field(default_factory=list)
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
    # Validated so a typo is a 400; respond does not yet compact inside a run (docs/api.md).
    context_management: list[ContextManagement] | None = None
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
