"""Output items and their content parts, as the Responses API returns them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from respond.protocol._base import Wire, omit_none

__all__ = [
    "CustomToolCallItem",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "LogProb",
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


OutputItem = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem | CustomToolCallItem,
    Field(discriminator="type"),
]
