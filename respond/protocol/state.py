"""Bodies of the stateful endpoints: compaction, conversations and their items."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from respond.protocol._base import Metadata, WireIn
from respond.protocol.requests import InputItem

__all__ = [
    "CompactBody",
    "ConversationCreateBody",
    "ConversationItemsBody",
    "MetadataBody",
    "deleted",
]


class CompactBody(WireIn):
    model: str
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


def deleted(object_id: str, kind: str) -> dict[str, Any]:
    return {"id": object_id, "object": f"{kind}.deleted", "deleted": True}
