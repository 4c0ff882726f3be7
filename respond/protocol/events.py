"""Streaming events, one small class per `type`.

`sequence_number` is assigned by the EventBuilder that emits them (responses/events.py);
nothing else sets it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from respond.protocol._base import Wire
from respond.protocol.items import (
    LogProb,
    OutputItem,
    OutputText,
    ReasoningText,
    Refusal,
    SummaryText,
)
from respond.protocol.resource import ResponseResource

__all__ = [
    "CompactionCompacting",
    "ContentPartAdded",
    "ContentPartDone",
    "CustomToolCallInputDelta",
    "CustomToolCallInputDone",
    "ErrorEvent",
    "Event",
    "FunctionCallArgumentsDelta",
    "FunctionCallArgumentsDone",
    "McpCallArgumentsDelta",
    "McpCallArgumentsDone",
    "McpCallCompleted",
    "McpCallFailed",
    "FileSearchCallCompleted",
    "CodeInterpreterCallCodeDelta",
    "CodeInterpreterCallCodeDone",
    "CodeInterpreterCallCompleted",
    "CodeInterpreterCallInProgress",
    "CodeInterpreterCallInterpreting",
    "FileSearchCallInProgress",
    "FileSearchCallSearching",
    "WebSearchCallCompleted",
    "WebSearchCallInProgress",
    "WebSearchCallSearching",
    "McpCallInProgress",
    "McpListToolsCompleted",
    "McpListToolsFailed",
    "McpListToolsInProgress",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextAnnotationAdded",
    "OutputTextDelta",
    "OutputTextDone",
    "ReasoningDelta",
    "ReasoningDone",
    "ReasoningEvents",
    "ReasoningSummaryPartAdded",
    "ReasoningSummaryPartDone",
    "ReasoningSummaryTextDelta",
    "ReasoningSummaryTextDone",
    "ReasoningTextDelta",
    "ReasoningTextDone",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseQueued",
    "TERMINAL_EVENTS",
    "TERMINAL_TYPES",
]

Part = Annotated[OutputText | Refusal | ReasoningText, Field(discriminator="type")]

# Which names reasoning text streams under: OpenAI's (response.reasoning_text.*, what the
# openai SDK, Codex, the Agents SDK and the AI SDK know) or the Open Responses spec's
# (response.reasoning.*). The payloads are the same.
ReasoningEvents = Literal["openai", "openresponses"]


class _Event(Wire):
    sequence_number: int = -1


class ResponseCreated(_Event):
    type: Literal["response.created"] = "response.created"
    response: ResponseResource


class ResponseQueued(_Event):
    type: Literal["response.queued"] = "response.queued"
    response: ResponseResource


class ResponseInProgress(_Event):
    type: Literal["response.in_progress"] = "response.in_progress"
    response: ResponseResource


class ResponseCompleted(_Event):
    type: Literal["response.completed"] = "response.completed"
    response: ResponseResource


class ResponseIncomplete(_Event):
    type: Literal["response.incomplete"] = "response.incomplete"
    response: ResponseResource


class ResponseFailed(_Event):
    type: Literal["response.failed"] = "response.failed"
    response: ResponseResource


class OutputItemAdded(_Event):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    output_index: int
    item: OutputItem


class OutputItemDone(_Event):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    output_index: int
    item: OutputItem


class ContentPartAdded(_Event):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    item_id: str
    output_index: int
    content_index: int
    part: Part


class ContentPartDone(_Event):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    item_id: str
    output_index: int
    content_index: int
    part: Part


class OutputTextDelta(_Event):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[LogProb] = Field(default_factory=list)


class OutputTextDone(_Event):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[LogProb] = Field(default_factory=list)


class OutputTextAnnotationAdded(_Event):
    """One annotation of an output_text part (a citation), before its text is done."""

    type: Literal["response.output_text.annotation.added"] = "response.output_text.annotation.added"
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: dict[str, Any]


class ReasoningTextDelta(_Event):
    """OpenAI's name for a reasoning text delta (the default)."""

    type: Literal["response.reasoning_text.delta"] = "response.reasoning_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDone(_Event):
    type: Literal["response.reasoning_text.done"] = "response.reasoning_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str


class ReasoningDelta(_Event):
    """The Open Responses name for a reasoning text delta (`--reasoning-events openresponses`)."""

    type: Literal["response.reasoning.delta"] = "response.reasoning.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningDone(_Event):
    type: Literal["response.reasoning.done"] = "response.reasoning.done"
    item_id: str
    output_index: int
    content_index: int
    text: str


class ReasoningSummaryPartAdded(_Event):
    """A summary of the reasoning begins (same names for OpenAI and Open Responses)."""

    type: Literal["response.reasoning_summary_part.added"] = "response.reasoning_summary_part.added"
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class ReasoningSummaryPartDone(_Event):
    type: Literal["response.reasoning_summary_part.done"] = "response.reasoning_summary_part.done"
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class ReasoningSummaryTextDelta(_Event):
    type: Literal["response.reasoning_summary_text.delta"] = "response.reasoning_summary_text.delta"
    item_id: str
    output_index: int
    summary_index: int
    delta: str


class ReasoningSummaryTextDone(_Event):
    type: Literal["response.reasoning_summary_text.done"] = "response.reasoning_summary_text.done"
    item_id: str
    output_index: int
    summary_index: int
    text: str


class FunctionCallArgumentsDelta(_Event):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDone(_Event):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    output_index: int
    arguments: str


class CustomToolCallInputDelta(_Event):
    """OpenAI's event for a custom tool call's input (not an Open Responses event)."""

    type: Literal["response.custom_tool_call_input.delta"] = "response.custom_tool_call_input.delta"
    item_id: str
    output_index: int
    delta: str


class CustomToolCallInputDone(_Event):
    type: Literal["response.custom_tool_call_input.done"] = "response.custom_tool_call_input.done"
    item_id: str
    output_index: int
    input: str


# MCP events: OpenAI's, not Open Responses events (docs/tools.md).


class _ItemEvent(_Event):
    item_id: str
    output_index: int


class McpListToolsInProgress(_ItemEvent):
    type: Literal["response.mcp_list_tools.in_progress"] = "response.mcp_list_tools.in_progress"


class McpListToolsCompleted(_ItemEvent):
    type: Literal["response.mcp_list_tools.completed"] = "response.mcp_list_tools.completed"


class McpListToolsFailed(_ItemEvent):
    type: Literal["response.mcp_list_tools.failed"] = "response.mcp_list_tools.failed"


class McpCallInProgress(_ItemEvent):
    type: Literal["response.mcp_call.in_progress"] = "response.mcp_call.in_progress"


class McpCallArgumentsDelta(_ItemEvent):
    type: Literal["response.mcp_call_arguments.delta"] = "response.mcp_call_arguments.delta"
    delta: str


class McpCallArgumentsDone(_ItemEvent):
    type: Literal["response.mcp_call_arguments.done"] = "response.mcp_call_arguments.done"
    arguments: str


class McpCallCompleted(_ItemEvent):
    type: Literal["response.mcp_call.completed"] = "response.mcp_call.completed"


class McpCallFailed(_ItemEvent):
    type: Literal["response.mcp_call.failed"] = "response.mcp_call.failed"


class FileSearchCallInProgress(_ItemEvent):
    type: Literal["response.file_search_call.in_progress"] = "response.file_search_call.in_progress"


class FileSearchCallSearching(_ItemEvent):
    type: Literal["response.file_search_call.searching"] = "response.file_search_call.searching"


class FileSearchCallCompleted(_ItemEvent):
    type: Literal["response.file_search_call.completed"] = "response.file_search_call.completed"


class WebSearchCallInProgress(_ItemEvent):
    type: Literal["response.web_search_call.in_progress"] = "response.web_search_call.in_progress"


class WebSearchCallSearching(_ItemEvent):
    type: Literal["response.web_search_call.searching"] = "response.web_search_call.searching"


class WebSearchCallCompleted(_ItemEvent):
    type: Literal["response.web_search_call.completed"] = "response.web_search_call.completed"


class CompactionCompacting(_ItemEvent):
    """OpenAI's progress of a compaction: new summary content was sampled (it carries none)."""

    type: Literal["response.compaction.compacting"] = "response.compaction.compacting"


class CodeInterpreterCallInProgress(_ItemEvent):
    type: Literal["response.code_interpreter_call.in_progress"] = (
        "response.code_interpreter_call.in_progress"
    )


class CodeInterpreterCallCodeDelta(_ItemEvent):
    type: Literal["response.code_interpreter_call_code.delta"] = (
        "response.code_interpreter_call_code.delta"
    )
    delta: str


class CodeInterpreterCallCodeDone(_ItemEvent):
    type: Literal["response.code_interpreter_call_code.done"] = (
        "response.code_interpreter_call_code.done"
    )
    code: str


class CodeInterpreterCallInterpreting(_ItemEvent):
    type: Literal["response.code_interpreter_call.interpreting"] = (
        "response.code_interpreter_call.interpreting"
    )


class CodeInterpreterCallCompleted(_ItemEvent):
    type: Literal["response.code_interpreter_call.completed"] = (
        "response.code_interpreter_call.completed"
    )


class ErrorEvent(_Event):
    """A stream-level error not tied to a response (e.g. a bad WebSocket frame)."""

    type: Literal["error"] = "error"
    error: dict[str, Any]


Event = Annotated[
    ResponseCreated
    | ResponseQueued
    | ResponseInProgress
    | ResponseCompleted
    | ResponseIncomplete
    | ResponseFailed
    | OutputItemAdded
    | OutputItemDone
    | ContentPartAdded
    | ContentPartDone
    | OutputTextDelta
    | OutputTextDone
    | OutputTextAnnotationAdded
    | ReasoningTextDelta
    | ReasoningTextDone
    | ReasoningDelta
    | ReasoningDone
    | ReasoningSummaryPartAdded
    | ReasoningSummaryPartDone
    | ReasoningSummaryTextDelta
    | ReasoningSummaryTextDone
    | FunctionCallArgumentsDelta
    | FunctionCallArgumentsDone
    | CustomToolCallInputDelta
    | CustomToolCallInputDone
    | McpListToolsInProgress
    | McpListToolsCompleted
    | McpListToolsFailed
    | McpCallInProgress
    | McpCallArgumentsDelta
    | McpCallArgumentsDone
    | McpCallCompleted
    | McpCallFailed
    | FileSearchCallInProgress
    | FileSearchCallSearching
    | FileSearchCallCompleted
    | WebSearchCallInProgress
    | WebSearchCallSearching
    | WebSearchCallCompleted
    | CompactionCompacting
    | CodeInterpreterCallInProgress
    | CodeInterpreterCallCodeDelta
    | CodeInterpreterCallCodeDone
    | CodeInterpreterCallInterpreting
    | CodeInterpreterCallCompleted
    | ErrorEvent,
    Field(discriminator="type"),
]

# The events that end a response's stream, exactly one per response: as classes (for
# isinstance) and as their `type` strings (for stored JSON events).
TERMINAL_EVENTS = (ResponseCompleted, ResponseIncomplete, ResponseFailed)
TERMINAL_TYPES = frozenset(kind.model_fields["type"].default for kind in TERMINAL_EVENTS)
