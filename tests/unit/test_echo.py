"""The response a run starts from: the request's settings echoed, the server's defaults where
the request set none."""

from __future__ import annotations

from typing import Any

from respond.protocol.requests import CreateResponseBody
from respond.responses.echo import echo_format, echo_tool_choice, resource


def started(body: dict[str, Any], **server: Any) -> dict[str, Any]:
    chosen: dict[str, Any] = {"temperature": 0.7, "max_output_tokens": 256} | server
    parsed = CreateResponseBody.model_validate({"input": "hi"} | body)
    started = resource(parsed, "m", response_id="resp_1", created_at=5, **chosen)
    return started.model_dump(mode="json")


def test_a_bare_request_shows_the_defaults_it_ran_with() -> None:
    shown = started({})
    assert (shown["id"], shown["created_at"], shown["model"]) == ("resp_1", 5, "m")
    assert shown["status"] == "in_progress"
    assert (shown["temperature"], shown["max_output_tokens"]) == (0.7, 256)
    assert shown["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    assert (shown["truncation"], shown["tool_choice"], shown["service_tier"]) == (
        "disabled",
        "auto",
        "default",
    )
    assert (shown["top_p"], shown["presence_penalty"], shown["top_logprobs"]) == (1.0, 0.0, 0)
    assert (shown["store"], shown["background"], shown["metadata"]) == (True, False, {})
    assert shown["reasoning"] == {"effort": None, "summary": None}


def test_what_the_request_sets_is_shown_as_sent() -> None:
    shown = started(
        {
            "background": True,
            "store": True,
            "truncation": "auto",
            "top_p": 0.5,
            "reasoning": {"effort": "low"},
            "metadata": {"k": "v"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        }
    )
    assert shown["status"] == "queued"  # a background run waits for its worker
    assert (shown["truncation"], shown["top_p"], shown["metadata"]) == ("auto", 0.5, {"k": "v"})
    assert shown["reasoning"]["effort"] == "low"
    assert [tool["name"] for tool in shown["tools"]] == ["f"]


def test_a_json_schema_format_shows_every_field_strict_false_by_default() -> None:
    body = CreateResponseBody.model_validate(
        {"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {}}}}
    )
    assert echo_format(body.text.format) == {
        "type": "json_schema",
        "name": "n",
        "schema": {},
        "description": None,
        "strict": False,
    }


def test_tool_choice_is_a_mode_as_sent_or_an_object_without_its_nulls() -> None:
    assert echo_tool_choice("required") == "required"
    named = CreateResponseBody.model_validate(
        {"input": "x", "tool_choice": {"type": "function", "name": "f"}}
    ).tool_choice
    assert echo_tool_choice(named) == {"type": "function", "name": "f"}
    allowed = CreateResponseBody.model_validate(
        {"input": "x", "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function"}]}}
    ).tool_choice
    assert echo_tool_choice(allowed) == {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function"}],
    }
