from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Wire", "WireIn", "omit_none"]


class Wire(BaseModel):
    """A JSON shape respond sends. Unknown fields are kept so nothing a client sent is lost."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=False)


class WireIn(BaseModel):
    """A JSON shape respond receives. Unknown fields are tolerated (clients send many)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def omit_none(default: Any = None) -> Any:
    """A field that is left out of the JSON when it is None (the schema forbids null there)."""
    return Field(default=default, exclude_if=lambda v: v is None)
