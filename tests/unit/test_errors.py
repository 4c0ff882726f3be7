"""Request validation errors name the field the client got wrong."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.requests import CreateResponseBody


def error_for(body: dict[str, Any]) -> APIError:
    with pytest.raises(ValidationError) as caught:
        CreateResponseBody.model_validate(body)
    return from_validation_error(caught.value, body)


def test_unknown_item_type_names_the_item_not_the_string_branch() -> None:
    error = error_for(
        {"input": [{"role": "user", "content": "hi"}, {"type": "hologram", "input": "x"}]}
    )
    assert error.param == "input[1]"
    assert "Unknown input item type" in error.message
    assert "function_call_output" in error.message


def test_missing_field_inside_an_item() -> None:
    error = error_for({"input": [{"type": "message", "role": "user"}]})
    assert error.param == "input[0].content"
    assert error.code == "missing_required_parameter"


def test_input_of_the_wrong_kind() -> None:
    assert error_for({"input": 5}).param == "input"
