from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = ["Metadata", "Wire", "WireIn", "omit_none"]


class Wire(BaseModel):
    """A JSON shape respond sends. Unknown fields are kept so nothing a client sent is lost."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class WireIn(BaseModel):
    """A JSON shape respond receives. Unknown fields are tolerated (clients send many)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def omit_none(default: Any = None) -> Any:
    """A field that is left out of the JSON when it is None (the schema forbids null there)."""
    return Field(default=default, exclude_if=lambda v: v is None)


def _metadata_limits(value: dict[str, str]) -> dict[str, str]:
    if len(value) > 16:
        raise ValueError("metadata can have at most 16 keys")
    for key, item in value.items():
        if len(key) > 64:
            raise ValueError(f"metadata key '{key[:20]}...' is longer than 64 characters")
        if len(item) > 512:
            raise ValueError(f"metadata value for '{key}' is longer than 512 characters")
    return value


# OpenAI's limits on `metadata` (responses and conversations): 16 pairs, 64-character
# keys, 512-character values.
Metadata = Annotated[dict[str, str], AfterValidator(_metadata_limits)]
