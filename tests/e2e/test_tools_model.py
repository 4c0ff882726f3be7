"""Tools and structured outputs with the real bundled model: valid by construction.

SmolLM2-135M knows nothing of tools; grammar-constrained decoding is what makes its
calls and JSON parse and validate. Every body and event is checked against the spec
(the `client` fixture's transport, `stream()` below).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import EasyInputMessageParam
from pydantic import BaseModel, Field

from tests.support.schema import validate_event, validate_response
from tests.support.server import Server
from tests.support.sse import read_events

MODEL = "smollm2-135m"
TIMEOUT = 900  # generous: on a loaded two-core machine a forced call can take minutes
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": WEATHER,
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "Current time in a zone",
        "parameters": TIME,
    },
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/responses", json={"model": MODEL, **body}, timeout=TIMEOUT
    )


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST",
        f"{server.base_url}/responses",
        json={"model": MODEL, **body, "stream": True},
        timeout=TIMEOUT,
    ) as reply:
        assert reply.status_code == 200, reply.read()
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    return events


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    for call in calls:
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])
        assert call["status"] == "completed" and call["call_id"]
    return calls


def test_required_gives_a_valid_call(server: Server) -> None:
    reply = post(
        server,
        {
            "input": "What is the weather in Paris?",
            "tools": TOOLS,
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "max_output_tokens": 64,
        },
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["status"] == "completed"
    assert len(calls_of(body)) == 1
    assert body["tools"][0]["strict"] is True


def test_named_function_streamed(server: Server) -> None:
    events = stream(
        server,
        {
            "input": "What is the weather in Paris?",
            "tools": TOOLS,
            "tool_choice": {"type": "function", "name": "get_time"},
            "parallel_tool_calls": False,
            "max_output_tokens": 48,
        },
    )
    types = [e["type"] for e in events]
    assert "response.output_text.delta" not in types
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["name"] == "get_time" and added["item"]["arguments"] == ""
    deltas = "".join(
        e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"
    )
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == deltas
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.completed"
    (call,) = calls_of(final)
    assert call["name"] == "get_time" and call["arguments"] == deltas


@pytest.mark.parametrize("streamed", [False, True])
def test_allowed_tools_required_stays_in_the_subset(server: Server, streamed: bool) -> None:
    body = {
        "input": "What time is it in Paris?",
        "tools": TOOLS,
        "tool_choice": {
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "function", "name": "get_weather"}],
        },
        "max_tool_calls": 2,
        "max_output_tokens": 96,
    }
    if streamed:
        final = stream(server, body)[-1]["response"]
    else:
        reply = post(server, body)
        assert reply.status_code == 200, reply.text
        final = reply.json()
    calls = calls_of(final)
    assert 1 <= len(calls) <= 2 or final["status"] == "incomplete"
    assert {call["name"] for call in calls} == {"get_weather"}


def tool_result(call: Any) -> str:
    return json.dumps({"city": json.loads(call.arguments)["city"], "temperature": 21})


def test_tool_loop_with_full_input_replay(client: openai.OpenAI) -> None:
    question: EasyInputMessageParam = {"role": "user", "content": "What is the weather in Paris?"}
    first = client.responses.create(
        model=MODEL,
        input=[question],
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=64,
        store=False,
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    second = client.responses.create(
        model=MODEL,
        input=[
            question,
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": tool_result(call)},
        ],
        tools=TOOLS,
        tool_choice="none",
        max_output_tokens=24,
        store=False,
    )
    assert second.status in ("completed", "incomplete")
    assert [item.type for item in second.output] == ["message"]
    assert second.output_text.strip()


def test_tool_loop_with_previous_response_id(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model=MODEL,
        input="What is the weather in Paris?",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        max_output_tokens=64,
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": tool_result(call)}
        ],
        tools=TOOLS,
        max_output_tokens=24,
    )
    assert second.status in ("completed", "incomplete")
    assert second.output  # text, or another valid call: the model decides under "auto"
    calls_of(second.model_dump(mode="json"))


class Unit(StrEnum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Place(BaseModel):
    city: str = Field(max_length=16)
    country: str = Field(max_length=16)


class Report(BaseModel):
    place: Place
    unit: Unit
    tags: list[Annotated[str, Field(max_length=12)]] = Field(max_length=3)
    warning: str | None = Field(max_length=24)


CITIES = [
    "Paris",
    "Tokyo",
    "Lima",
    "Cairo",
    "Oslo",
    "Quito",
    "Delhi",
    "Rome",
    "Seoul",
    "Accra",
    "Lagos",
    "Hanoi",
    "Dublin",
    "Madrid",
    "Nairobi",
    "Sydney",
    "Toronto",
    "Berlin",
    "Bogota",
    "Riga",
]


def test_parse_nested_pydantic_model_on_20_prompts(client: openai.OpenAI) -> None:
    seen_units: set[Unit] = set()
    for city in CITIES:
        parsed = client.responses.parse(
            model=MODEL,
            input=f"Give a short weather report for {city} as JSON.",
            text_format=Report,
            max_output_tokens=200,  # above the longest JSON the bounded schema allows
            temperature=0.7,
        )
        assert parsed.status == "completed", parsed.output_text
        report = parsed.output_parsed
        assert isinstance(report, Report)
        assert len(report.tags) <= 3 and len(report.place.city) <= 16
        seen_units.add(report.unit)
    assert seen_units  # enums decoded as enums


def test_json_object_and_verbosity_echo(server: Server) -> None:
    reply = post(
        server,
        {
            "input": "Describe Paris as a JSON object.",
            "text": {"format": {"type": "json_object"}, "verbosity": "low"},
            "max_output_tokens": 48,
        },
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["text"]["verbosity"] == "low"
    if body["status"] == "completed":
        assert isinstance(json.loads(body["output"][0]["content"][0]["text"]), dict)


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        (
            {
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "n",
                        "strict": True,
                        "schema": {
                            "type": "object",
                            "properties": {"n": {"type": "integer", "not": {"const": 1}}},
                        },
                    }
                }
            },
            "text.format.schema",
            "not",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "name": "f",
                        "parameters": {
                            "type": "object",
                            "properties": {"a": {"type": "array", "uniqueItems": True}},
                        },
                    }
                ]
            },
            "tools[0].parameters",
            "uniqueItems",
        ),
        ({"tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name", "name"),
        (
            {"tools": [{"type": "function", "name": "f", "parameters": {"type": "string"}}]},
            "tools[0].parameters",
            "object",
        ),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
            "tool_choice.name",
            "nope",
        ),
        (
            {"tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}},
            "tool_choice",
            "web_search",
        ),
        ({"tool_choice": "required"}, "tool_choice", "no function tools"),
    ],
)
def test_bad_tools_and_schemas_are_400_with_param(
    server: Server, body: dict[str, Any], param: str, needle: str
) -> None:
    reply = post(server, {"input": "hi", "max_output_tokens": 8, **body})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param
    assert needle in error["message"]


def test_unsupported_keyword_is_fine_when_not_strict(server: Server) -> None:
    tool = {
        "type": "function",
        "name": "f",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"tags": {"type": "array", "uniqueItems": True}},
        },
    }
    reply = post(
        server,
        {
            "input": "hi",
            "tools": [tool],
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "max_output_tokens": 96,
            "temperature": 0,
        },
    )
    assert reply.status_code == 200, reply.text
    response = reply.json()
    (call,) = [i for i in response["output"] if i["type"] == "function_call"]
    if response["status"] == "incomplete":
        # Generic JSON lets a tiny model go on writing (keys, a long string) until the token
        # limit cuts it. (The cut call's item then says "completed": ToolCallEnd closes it.)
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    else:
        assert isinstance(json.loads(call["arguments"]), dict)  # generic JSON: not enforceable
    assert "cannot be enforced; the arguments are any JSON object" in server.log()


BOUNDED = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "threshold": {
            "type": "number",
            "exclusiveMinimum": -10,
            "maximum": 45.5,
            "multipleOf": 0.1,
        },
        "step": {"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 60},
    },
    "required": ["city", "days", "threshold", "step"],
    "additionalProperties": False,
}


def test_non_strict_tool_follows_numeric_bounds(server: Server) -> None:
    """The whole strict-mode subset, numeric bounds included, is enforced, strict or not
    (the AI SDK sends tools without strict; strict ones get the same grammar, see
    tests/native/test_decoding_plan.py)."""
    tool = {"type": "function", "name": "forecast", "strict": False, "parameters": BOUNDED}
    reply = post(
        server,
        {
            "input": "Will it freeze in Oslo in 3 days?",
            "tools": [tool],
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "max_output_tokens": 120,
            "temperature": 0,
        },
    )
    assert reply.status_code == 200, reply.text
    response = reply.json()
    assert response["status"] == "completed", response
    (call,) = [i for i in response["output"] if i["type"] == "function_call"]
    jsonschema.validate(json.loads(call["arguments"]), BOUNDED)


@pytest.mark.parametrize(
    ("choice", "streamed"),
    [("required", False), ({"type": "function", "name": "get_weather"}, True)],
    ids=["required", "named-streamed"],
)
def test_forced_call_with_parallel_calls_completes_without_repeats(
    server: Server, choice: Any, streamed: bool
) -> None:
    """Parallel calls allowed (the default): the model may add different calls, but an
    exact repeat ends the turn instead of running on to max_output_tokens."""
    body = {
        "input": "What is the weather in Paris?",
        "tools": TOOLS,
        "tool_choice": choice,
        "max_output_tokens": 400,
        "temperature": 0,
    }
    if streamed:
        events = stream(server, body)
        assert events[-1]["type"] == "response.completed"
        final = events[-1]["response"]
        added = [e for e in events if e["type"] == "response.output_item.added"]
        assert len(added) == len(final["output"])  # no call was streamed, then dropped
    else:
        reply = post(server, body)
        assert reply.status_code == 200, reply.text
        final = reply.json()
        validate_response(final)
    assert final["status"] == "completed" and final["incomplete_details"] is None
    calls = calls_of(final)
    assert calls and len(final["output"]) == len(calls)
    made = [(call["name"], json.loads(call["arguments"])) for call in calls]
    assert all(made.count(one) == 1 for one in made), made
    assert final["usage"]["output_tokens"] < 400
    assert "dropped an exact repeat of the call" in server.log()


def test_hosted_tool_types_are_left_out_without_breaking(server: Server) -> None:
    # (file_search is run by respond now: tests/e2e/test_file_search.py)
    tools = [
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        TOOLS[1],
    ]
    reply = post(server, {"input": "hi", "tools": tools, "max_output_tokens": 8})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert [tool["name"] for tool in body["tools"]] == ["get_time"]


def test_custom_tool_input_follows_its_regex(server: Server) -> None:
    tool = {
        "type": "custom",
        "name": "pick_color",
        "description": "Pick a color",
        "format": {"type": "grammar", "syntax": "regex", "definition": "(red|green|blue)"},
    }
    reply = post(
        server,
        {
            "input": "Pick a color for the sky.",
            "tools": [tool],
            "tool_choice": {"type": "custom", "name": "pick_color"},
            "parallel_tool_calls": False,
            "max_output_tokens": 32,
        },
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    (call,) = [item for item in body["output"] if item["type"] == "custom_tool_call"]
    assert call["name"] == "pick_color"
    assert call["input"] in ("red", "green", "blue")
    # custom_tool_call and a custom tool_choice are OpenAI shapes, outside the Open
    # Responses schema (docs/tools.md); the rest validates.
    assert body["tool_choice"] == {"type": "custom", "name": "pick_color"}
    validate_response({**body, "output": [], "tool_choice": "required"})


def test_forced_custom_tool_call_cut_short_leaks_no_markup(server: Server) -> None:
    """The call markup plus JSON takes about 30 tokens; a limit that cuts its close tag must
    still leave exactly one call item and no text."""
    tool = {
        "type": "custom",
        "name": "pick_color",
        "format": {"type": "grammar", "syntax": "regex", "definition": "(red|green|blue)"},
    }
    body = {
        "input": "Pick a color for the sky.",
        "tools": [tool],
        "tool_choice": {"type": "custom", "name": "pick_color"},
        "parallel_tool_calls": False,
        "max_output_tokens": 32,
    }
    for limit in (28, 29, 30, 31, 32, 64):
        response = post(server, {**body, "max_output_tokens": limit, "temperature": 0}).json()
        assert [item["type"] for item in response["output"]] == ["custom_tool_call"], limit
