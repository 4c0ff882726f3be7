"""Wire shapes of the Containers API (OpenAI's): containers and their files."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from respond.protocol._base import Wire, WireIn

__all__ = [
    "DEFAULT_MINUTES",
    "Container",
    "ContainerCreateBody",
    "ContainerExpiry",
    "ContainerFile",
    "ContainerFileBody",
]

DEFAULT_MINUTES = 20  # OpenAI's: a container idle this long expires


class ContainerExpiry(WireIn):
    anchor: Literal["last_active_at"]
    minutes: int = Field(ge=1, le=1440)


class ContainerCreateBody(WireIn):
    name: str = Field(min_length=1, max_length=256)
    expires_after: ContainerExpiry | None = None
    file_ids: list[str] = Field(default_factory=list, max_length=100)
    # Accepted as OpenAI takes it; the server's --code-interpreter-memory-mb applies.
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None


class ContainerFileBody(WireIn):
    """POST /v1/containers/{id}/files as JSON: a file of the Files API, copied in."""

    file_id: str = Field(min_length=1, max_length=256)


class Container(Wire):
    id: str
    object: Literal["container"] = "container"
    created_at: int
    name: str
    status: Literal["running", "expired"] = "running"
    expires_after: ContainerExpiry
    last_active_at: int


class ContainerFile(Wire):
    id: str
    object: Literal["container.file"] = "container.file"
    container_id: str
    created_at: int
    bytes: int
    path: str  # /mnt/data/..., as the code sees it
    source: Literal["user", "assistant"]
