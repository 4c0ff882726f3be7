"""Bodies of the stateful endpoints: compaction, conversations and their items."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from respond.protocol._base import Wire, WireIn
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


def _check_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > 16:
        raise ValueError("metadata can have at most 16 keys")
    for key, item in value.items():
        if len(key) > 64 or len(item) > 512:
            raise ValueError("metadata keys are at most 64 characters, values at most 512")
    return value


class CompactBody(WireIn):
    model: str
    input: str | list[InputItem] = Field(default_factory=list)
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: str | None = None


class ConversationCreateBody(WireIn):
    items: list[InputItem] = Field(default_factory=list, max_length=20)
    metadata: dict[str, str] | None = None

    @field_validator("metadata")
    @classmethod
    def _limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return _check_metadata(value)


class MetadataBody(WireIn):
    metadata: dict[str, str]

    @field_validator("metadata")
    @classmethod
    def _limits(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_metadata(value) or {}


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
