from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["Metadata", "Wire", "WireIn", "omit_none"]


class Wire(BaseModel):
    """A JSON shape respond sends. Unknown fields are kept so nothing a client sent is lost."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class WireIn(BaseModel):
    """A JSON shape respond receives. Unknown fields are tolerated (clients send many).

    A JSON null on a field that may be left out means "left out": OpenAI's and Anthropic's
    own types make those fields Optional and clients send the nulls (LlamaIndex sends
    `"include": null` on every call). A field listed in `keeps_null` is the exception, where
    null says something absence does not (an update's "clear this").
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    keeps_null: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if not isinstance(data, dict) or None not in data.values():
            return data
        optional = _optional_keys(cls)
        return {k: v for k, v in data.items() if v is not None or k not in optional}


def _optional_keys(model: type[WireIn]) -> set[str]:
    """The JSON names (field names and aliases) of the fields that have a default, less
    those whose null means something. A required field keeps its null, so it fails as one."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        if not field.is_required() and name not in model.keeps_null:
            keys.update(key for key in (name, field.alias) if key)
    return keys


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
