"""Output items and their content parts, as the Responses API returns them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from respond.protocol._base import Wire, omit_none

__all__ = [
    "ApplyPatchCallItem",
    "CompactionItem",
    "CodeInterpreterCallItem",
    "ComputerCallItem",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "WebSearchCallItem",
    "LocalShellAction",
    "LocalShellCallItem",
    "PatchOperation",
    "ShellAction",
    "ShellCallItem",
    "ShellCallOutputItem",
    "CustomToolCallItem",
    "FunctionCallItem",
    "FileSearchCallItem",
    "FunctionCallOutputItem",
    "LogProb",
    "McpApprovalRequestItem",
    "McpCallItem",
    "McpListToolsItem",
    "McpToolInfo",
    "MessageItem",
    "OutputItem",
    "OutputText",
    "ReasoningItem",
    "ReasoningText",
    "Refusal",
    "SummaryText",
    "TopLogProb",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]


class TopLogProb(Wire):
    token: str
    logprob: float
    bytes: list[int]


class LogProb(Wire):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogProb] = Field(default_factory=list)


class OutputText(Wire):
    type: Literal["output_text"] = "output_text"
    text: str = ""
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[LogProb] = Field(default_factory=list)


class Refusal(Wire):
    type: Literal["refusal"] = "refusal"
    refusal: str = ""


class ReasoningText(Wire):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str = ""


class SummaryText(Wire):
    type: Literal["summary_text"] = "summary_text"
    text: str = ""


class MessageItem(Wire):
    type: Literal["message"] = "message"
    id: str
    status: ItemStatus = "in_progress"
    role: Literal["assistant", "user", "system", "developer"] = "assistant"
    content: list[Annotated[OutputText | Refusal, Field(discriminator="type")]] = Field(
        default_factory=list
    )


class FunctionCallItem(Wire):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    namespace: str | None = omit_none()  # a member of a `namespace` tool
    arguments: str = ""
    status: ItemStatus = "in_progress"


class CustomToolCallItem(Wire):
    """A call to a `custom` tool: free-form `input` instead of JSON arguments.

    OpenAI's Responses shape; the Open Responses item schema has no such item (see
    docs/tools.md).
    """

    type: Literal["custom_tool_call"] = "custom_tool_call"
    id: str
    call_id: str
    name: str
    namespace: str | None = omit_none()  # a member of a `namespace` tool
    input: str = ""
    status: ItemStatus = "in_progress"


class FunctionCallOutputItem(Wire):
    type: Literal["function_call_output"] = "function_call_output"
    id: str
    call_id: str
    output: str | list[Any]
    status: ItemStatus = "completed"


class ReasoningItem(Wire):
    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] = Field(default_factory=list)
    encrypted_content: str | None = omit_none()
    status: ItemStatus | None = omit_none()


class McpToolInfo(Wire):
    """One tool of an MCP server, as an `mcp_list_tools` item lists it."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    annotations: dict[str, Any] | None = None


# MCP items are OpenAI's Responses shapes; the Open Responses item schema has none (see
# docs/tools.md). respond runs the calls itself (responses/hosted/).


class McpListToolsItem(Wire):
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    id: str
    server_label: str
    tools: list[McpToolInfo] = Field(default_factory=list)
    error: str | None = omit_none()


class McpCallItem(Wire):
    type: Literal["mcp_call"] = "mcp_call"
    id: str
    server_label: str
    name: str
    arguments: str = ""
    output: str | None = None
    # {"type": "mcp_tool_execution_error", "content": [...]} or
    # {"type": "mcp_protocol_error" | "http_error", "code": ..., "message": ...}
    error: dict[str, Any] | None = None
    approval_request_id: str | None = omit_none()
    status: Literal["in_progress", "calling", "completed", "incomplete", "failed"] = "in_progress"


class McpApprovalRequestItem(Wire):
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    id: str
    server_label: str
    name: str
    arguments: str = ""


class FileSearchCallItem(Wire):
    """A search of vector stores respond ran for the model (OpenAI's `file_search_call`);
    `results` only with `include: ["file_search_call.results"]`."""

    type: Literal["file_search_call"] = "file_search_call"
    id: str
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"] = "in_progress"
    queries: list[str] = Field(default_factory=list)
    results: list[dict[str, Any]] | None = None


class CodeInterpreterCallItem(Wire):
    """Python respond ran in a container for the model (OpenAI's `code_interpreter_call`);
    `outputs` ({"type": "logs", "logs"} and {"type": "image", "url"}) only with
    `include: ["code_interpreter_call.outputs"]`."""

    type: Literal["code_interpreter_call"] = "code_interpreter_call"
    id: str
    code: str | None = ""
    container_id: str
    outputs: list[dict[str, Any]] | None = None
    status: Literal["in_progress", "interpreting", "completed", "incomplete", "failed"] = (
        "in_progress"
    )


class WebSearchCallItem(Wire):
    """A web search, or a page opened or searched, that respond ran for the model (OpenAI's
    `web_search_call`). `action` is `{"type": "search", "query", "sources"}` (`sources`
    only with `include: ["web_search_call.action.sources"]`), `{"type": "open_page", "url"}`
    or `{"type": "find_in_page", "url", "pattern"}`."""

    type: Literal["web_search_call"] = "web_search_call"
    id: str
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"] = "in_progress"
    action: dict[str, Any] = Field(default_factory=dict)


# Calls of the tools the client runs (shell, local_shell, apply_patch): OpenAI's shapes.


class ShellAction(Wire):
    commands: list[str] = Field(default_factory=list)
    timeout_ms: int | None = None
    max_output_length: int | None = None


class ShellCallItem(Wire):
    type: Literal["shell_call"] = "shell_call"
    id: str
    call_id: str
    action: ShellAction = Field(default_factory=ShellAction)
    status: ItemStatus = "in_progress"
    # A shell respond runs: the container it ran in ({"type": "container_reference", ...}).
    environment: dict[str, Any] | None = omit_none()


class ShellCallOutputItem(Wire):
    """What the commands of a shell call respond ran printed, and how each ended:
    `[{"stdout", "stderr", "outcome": {"type": "exit", "exit_code"} | {"type": "timeout"}}]`."""

    type: Literal["shell_call_output"] = "shell_call_output"
    id: str
    call_id: str
    output: list[dict[str, Any]] = Field(default_factory=list)
    max_output_length: int | None = omit_none()
    status: ItemStatus = "in_progress"


class LocalShellAction(Wire):
    type: Literal["exec"] = "exec"
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int | None = omit_none()
    working_directory: str | None = omit_none()
    user: str | None = omit_none()


class LocalShellCallItem(Wire):
    type: Literal["local_shell_call"] = "local_shell_call"
    id: str
    call_id: str
    action: LocalShellAction = Field(default_factory=LocalShellAction)
    status: ItemStatus = "in_progress"


class PatchOperation(Wire):
    """create_file and update_file carry a V4A `diff`; delete_file only its path."""

    type: Literal["create_file", "update_file", "delete_file"]
    path: str
    diff: str | None = omit_none()


class ApplyPatchCallItem(Wire):
    type: Literal["apply_patch_call"] = "apply_patch_call"
    id: str
    call_id: str
    operation: PatchOperation
    status: Literal["in_progress", "completed"] = "in_progress"


class ComputerCallItem(Wire):
    """Actions on the client's screen (click, type, screenshot, ...: OpenAI's action shapes,
    made by responses/kinds/computer_call.py): one `action` (computer_use_preview), or a
    batch of `actions` (the GA computer tool)."""

    type: Literal["computer_call"] = "computer_call"
    id: str
    call_id: str
    action: dict[str, Any] | None = omit_none()
    actions: list[dict[str, Any]] | None = omit_none()
    pending_safety_checks: list[dict[str, Any]] = Field(default_factory=list)
    status: ItemStatus = "in_progress"


# A search of the request's deferred tools (`tool_search`), and the tools it loaded. A
# search respond ran (execution "server") has no call_id.


class ToolSearchCallItem(Wire):
    type: Literal["tool_search_call"] = "tool_search_call"
    id: str
    call_id: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    execution: Literal["server", "client"] = "server"
    status: ItemStatus = "in_progress"


class ToolSearchOutputItem(Wire):
    type: Literal["tool_search_output"] = "tool_search_output"
    id: str
    call_id: str | None = None
    execution: Literal["server", "client"] = "server"
    tools: list[dict[str, Any]] = Field(default_factory=list)  # as the request gave them
    status: ItemStatus = "in_progress"


# The context before it, compacted (`context_management`, responses/compacting.py): opaque,
# sealed by the server. Its only fields are these (it has no status).


class CompactionItem(Wire):
    type: Literal["compaction"] = "compaction"
    id: str
    encrypted_content: str


OutputItem = Annotated[
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | ReasoningItem
    | CustomToolCallItem
    | McpListToolsItem
    | McpCallItem
    | McpApprovalRequestItem
    | FileSearchCallItem
    | CodeInterpreterCallItem
    | WebSearchCallItem
    | ShellCallItem
    | ShellCallOutputItem
    | LocalShellCallItem
    | ApplyPatchCallItem
    | ComputerCallItem
    | ToolSearchCallItem
    | ToolSearchOutputItem
    | CompactionItem,
    Field(discriminator="type"),
]
