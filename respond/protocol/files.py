"""Wire shapes of the Files, Vector Stores and Embeddings APIs (OpenAI's)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from respond.protocol._base import Metadata, Wire, WireIn

__all__ = [
    "PURPOSES",
    "Attributes",
    "AutoChunking",
    "ChunkingStrategy",
    "ComparisonFilter",
    "CompoundFilter",
    "EmbeddingsBody",
    "ExpiresAfter",
    "FileBatchCreateBody",
    "FileObject",
    "Filter",
    "RankingOptions",
    "SearchBody",
    "StaticChunking",
    "StaticChunkingSizes",
    "VectorStore",
    "VectorStoreCreateBody",
    "VectorStoreFile",
    "VectorStoreFileBody",
    "VectorStoreFileUpdateBody",
    "VectorStoreUpdateBody",
]

# The purposes OpenAI's POST /v1/files accepts.
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")

# A vector store file's attributes: 16 keys of at most 64 characters; strings of at most 512.
AttributeValue = Annotated[str, Field(max_length=512)] | bool | float
Attributes = Annotated[
    dict[Annotated[str, Field(max_length=64)], AttributeValue], Field(max_length=16)
]


# ---------------------------------------------------------------- chunking


class StaticChunkingSizes(WireIn):
    max_chunk_size_tokens: int = Field(ge=100, le=4096)
    chunk_overlap_tokens: int = Field(ge=0)


class StaticChunking(WireIn):
    type: Literal["static"]
    static: StaticChunkingSizes


class AutoChunking(WireIn):
    type: Literal["auto"]


ChunkingStrategy = Annotated[AutoChunking | StaticChunking, Field(discriminator="type")]


# ---------------------------------------------------------------- filters


class ComparisonFilter(WireIn):
    type: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
    key: str = Field(max_length=64)
    value: str | bool | float | list[str | float] = Field(union_mode="left_to_right")


class CompoundFilter(WireIn):
    type: Literal["and", "or"]
    filters: list[Filter] = Field(min_length=1, max_length=32)


Filter = Annotated[ComparisonFilter | CompoundFilter, Field(union_mode="left_to_right")]
CompoundFilter.model_rebuild()


class RankingOptions(WireIn):
    ranker: Literal["auto", "default-2024-11-15", "none"] | str = "auto"
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)


# ---------------------------------------------------------------- request bodies


class ExpiresAfter(WireIn):
    anchor: Literal["last_active_at"]
    days: int = Field(ge=1, le=365)


class VectorStoreCreateBody(WireIn):
    name: str | None = Field(default=None, max_length=256)
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    expires_after: ExpiresAfter | None = None
    chunking_strategy: ChunkingStrategy | None = None
    metadata: Metadata | None = None
    description: str | None = Field(default=None, max_length=512)


class VectorStoreUpdateBody(WireIn):
    keeps_null = frozenset({"expires_after"})  # null: never expire
    name: str | None = Field(default=None, max_length=256)
    expires_after: ExpiresAfter | None = None
    metadata: Metadata | None = None


class VectorStoreFileBody(WireIn):
    file_id: str = Field(max_length=256)
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class VectorStoreFileUpdateBody(WireIn):
    attributes: Attributes | None


class FileBatchCreateBody(WireIn):
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    files: list[VectorStoreFileBody] = Field(default_factory=list, max_length=500)
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class SearchBody(WireIn):
    query: Annotated[str, Field(max_length=4096)] | list[Annotated[str, Field(max_length=4096)]] = (
        Field(union_mode="left_to_right")
    )
    filters: Filter | None = None
    max_num_results: int = Field(default=10, ge=1, le=50)
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = False


class EmbeddingsBody(WireIn):
    # Token arrays (lists of ints) parse too, so the route can say they are not supported.
    input: str | list[str] | list[int] | list[list[int]] = Field(union_mode="left_to_right")
    model: str = Field(max_length=256)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None


# ---------------------------------------------------------------- answers (documented shapes)


class FileObject(Wire):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    expires_at: int | None = None
    filename: str
    purpose: str
    status: str = "processed"


class VectorStore(Wire):
    id: str
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str | None = None
    usage_bytes: int
    file_counts: dict[str, int]
    status: Literal["expired", "in_progress", "completed"]
    expires_after: dict[str, Any] | None = None
    expires_at: int | None = None
    last_active_at: int | None = None
    metadata: dict[str, str] | None = None


class VectorStoreFile(Wire):
    id: str
    object: Literal["vector_store.file"] = "vector_store.file"
    usage_bytes: int
    created_at: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    last_error: dict[str, str] | None = None
    attributes: dict[str, Any] | None = None
    chunking_strategy: dict[str, Any] | None = None
