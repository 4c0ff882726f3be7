"""The spec validator the e2e tests rely on really rejects what the spec forbids."""

from __future__ import annotations

import pytest

from respond.protocol.resource import ResponseResource
from tests.support.schema import validate_event, validate_response


def resource() -> dict[str, object]:
    return ResponseResource(id="resp_1", created_at=1, status="completed", model="m").model_dump(
        mode="json"
    )


def test_a_full_resource_validates_and_a_missing_field_does_not() -> None:
    body = resource()
    validate_response(body)
    del body["completed_at"]
    with pytest.raises(AssertionError, match="completed_at"):
        validate_response(body)


def test_events_are_checked_by_their_type() -> None:
    good = {
        "type": "response.output_text.delta",
        "sequence_number": 3,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "hi",
        "logprobs": [],
    }
    validate_event(good)
    with pytest.raises(AssertionError):
        validate_event({**good, "delta": None})
    with pytest.raises(AssertionError, match="not an Open Responses"):
        validate_event({"type": "response.made_up", "sequence_number": 0})


def test_json_schema_format_echo_is_accepted_despite_the_spec_defect() -> None:
    body = resource()
    fmt = {"type": "json_schema", "name": "x", "schema": {"type": "object"}}
    body["text"] = {"format": {**fmt, "description": None, "strict": True}}
    validate_response(body)
