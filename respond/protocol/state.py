"""Bodies of the stateful endpoints: compaction, conversations and their items."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from respond.protocol._base import Metadata, Wire, WireIn
from respond.protocol.requests import InputItem

__all__ = [
    "CompactBody",
    "CompactResource",
    "Conversation",
    "ConversationCreateBody",
    "ConversationItemsBody",
    "Deleted",
    "InputTokens",
    "ItemList",
    "MetadataBody",
    "deleted",
]


class CompactBody(WireIn):
    model: str | None = None  # the SDK types it nullable; absent or null: the default model
    input: str | list[InputItem] = Field(default_factory=list)
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: str | None = None


class ConversationCreateBody(WireIn):
    items: list[InputItem] = Field(default_factory=list, max_length=20)
    metadata: Metadata | None = None


class MetadataBody(WireIn):
    metadata: Metadata


class ConversationItemsBody(WireIn):
    items: list[InputItem] = Field(min_length=1, max_length=20)


# ---------------------------------------------------------------- answers (documented shapes)


class Deleted(Wire):
    id: str
    object: str
    deleted: bool


class InputTokens(Wire):
    object: Literal["response.input_tokens"] = "response.input_tokens"
    input_tokens: int


class ItemList(Wire):
    """A page of items: a response's input items or a conversation's items."""

    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool


class CompactResource(Wire):
    id: str
    object: Literal["response.compaction"] = "response.compaction"
    created_at: int
    output: list[dict[str, Any]]
    usage: dict[str, Any]


class Conversation(Wire):
    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, str]


def deleted(object_id: str, kind: str) -> dict[str, Any]:
    return {"id": object_id, "object": f"{kind}.deleted", "deleted": True}
