"""Turn Responses input items into the chat messages an engine sees."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from respond._ids import new_id
from respond.engines._base import ChatMessage
from respond.protocol.errors import APIError
from respond.protocol.requests import InputItem, InputMessage, ItemReference
from respond.responses.kinds import Replay, replay_of
from respond.responses.kinds._base import HostedNames

__all__ = ["items_to_messages", "normalize_input", "stored_item"]

_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "mcp_approval_response": "mcpa",
    "computer_call": "cu",
    "computer_call_output": "cuo",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
}


def normalize_input(value: str | Sequence[InputItem]) -> list[InputItem]:
    if isinstance(value, str):
        return [InputMessage(role="user", content=value)]
    return list(value)


def stored_item(item: InputItem) -> dict[str, Any]:
    """The wire form of an input item as it is kept and listed (with an id and status)."""
    data = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(item, InputMessage):
        content = item.content
        if isinstance(content, str):
            kind = "output_text" if item.role == "assistant" else "input_text"
            data["content"] = [{"type": kind, "text": content}]
        data["type"] = "message"
    data.setdefault("id", new_id(_ID_PREFIX.get(data["type"], "item")))
    data.setdefault("status", "completed")
    return data


def items_to_messages(
    items: Sequence[InputItem],
    *,
    vision: bool,
    param: str = "input",
    hosted_names: HostedNames | None = None,
    namespaced: Callable[[str, str], str] | None = None,
) -> list[ChatMessage]:
    """Input items (in context order) -> chat messages, each replayed by its kind
    (responses/kinds/).

    Consecutive calls form one assistant turn with several tool calls; a reasoning item
    is carried on the assistant turn that follows it. Hosted calls (MCP, file_search)
    replay as the function calls the model made (a server's hosted tools under the names
    `hosted_names` gives them) and their results; a namespace's calls under the names
    `namespaced` gives them.
    Compaction items were opened into items before this (history.py).
    """
    replay = Replay(
        vision=vision,
        hosted_names=hosted_names or (lambda _label, name: name),
        namespaced=namespaced,
    )
    for index, item in enumerate(items):
        where = f"{param}[{index}]"
        if isinstance(item, ItemReference):
            raise APIError(
                404,
                f"Item with id '{item.id}' not found.",
                param=f"{where}.id",
                code="item_not_found",
            )
        how = replay_of(item)
        if how is not None:
            how(item, replay, where)
    return replay.messages
