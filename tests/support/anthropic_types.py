"""Strict parsing with the `anthropic` SDK's own types: nothing unknown, nothing left over."""

from __future__ import annotations

from typing import Any

import anthropic.types as at
from pydantic import BaseModel, TypeAdapter

EVENT: TypeAdapter[at.RawMessageStreamEvent] = TypeAdapter(at.RawMessageStreamEvent)


def strict(model: type[BaseModel], raw: dict[str, Any]) -> Any:
    parsed = model.model_validate(raw)
    assert parsed.model_dump(mode="json", exclude_unset=True) == raw
    return parsed


def strict_event(event: dict[str, Any]) -> None:
    if event["type"] == "ping":  # the SDK skips pings: it has no type for them
        assert event == {"type": "ping"}
    elif event["type"] == "error":
        strict(at.ErrorResponse, {**event, "request_id": None})
    else:
        parsed = EVENT.validate_python(event)
        assert parsed.model_dump(mode="json", exclude_unset=True) == event
