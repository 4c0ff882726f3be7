"""The guarantees respond keeps in front of any real Chat Completions upstream.

Imported by each real-upstream module (test_upstream_llamaserver.py, test_upstream_llamacpp.py),
whose `front` fixture is respond in front of that upstream serving the bundled model as
ALIAS: forced calls are calls, strict arguments match their schema, usage is never null,
the translation of tool results / developer messages / earlier reasoning is accepted, an
overflow is the client's 400, and truncation "auto" fits the upstream's window.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import httpx
import jsonschema
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai.types.responses import (
    CustomToolParam,
    FunctionToolParam,
    ResponseCompletedEvent,
    ResponseIncompleteEvent,
)

from tests.support.schema import validate_event, validate_response
from tests.support.server import Server
from tests.support.sse import read_events

__all__ = [
    "ALIAS",
    "test_a_forced_custom_call_is_decoded_under_its_grammar",
    "test_a_function_call_output_round_trip_is_accepted",
    "test_a_named_function_is_called",
    "test_a_prompt_too_long_is_a_400_context_length_exceeded",
    "test_earlier_reasoning_is_accepted",
    "test_forced_call_streams_as_a_function_call",
    "test_langchain_bind_tools_forced_and_required",
    "test_required_tool_choice_gives_a_call_with_valid_arguments",
    "test_truncation_auto_fits_the_upstream_window",
    "test_usage_is_reported_json_and_streamed",
]

ALIAS = "smollm2-upstream"
TIMEOUT = 300  # a loaded machine makes the upstream slow; never a timed assertion

WEATHER: FunctionToolParam = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME: FunctionToolParam = {
    "type": "function",
    "name": "get_time",
    "description": "The time in a time zone.",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    },
    "strict": True,
}


def client(front: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=front.base_url, api_key="none", timeout=TIMEOUT, max_retries=0)


def post(front: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{front.base_url}/responses", json={"model": ALIAS, **body}, timeout=TIMEOUT)


def assert_usage(usage: Any) -> None:
    assert usage is not None, "usage is null"
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0, usage
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_required_tool_choice_gives_a_call_with_valid_arguments(front: Server) -> None:
    with client(front) as sdk:
        response = sdk.responses.create(
            model=ALIAS,
            input="What is the weather in Paris?",
            tools=[WEATHER, TIME],
            tool_choice="required",
            max_output_tokens=64,
            temperature=0,
        )
    body = response.model_dump(mode="json")
    validate_response(body)
    assert response.status == "completed", response.incomplete_details
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    tool = {"get_weather": WEATHER, "get_time": TIME}[call["name"]]
    jsonschema.validate(json.loads(call["arguments"]), tool["parameters"])
    assert_usage(body["usage"])


def test_a_named_function_is_called(front: Server) -> None:
    with client(front) as sdk:
        response = sdk.responses.create(
            model=ALIAS,
            input="What is the weather in Paris?",  # asks for the other tool on purpose
            tools=[WEATHER, TIME],
            tool_choice={"type": "function", "name": "get_time"},
            max_output_tokens=64,
            temperature=0,
        )
    assert response.status == "completed", response.incomplete_details
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert call.name == "get_time"
    assert json.loads(call.arguments)["zone"] in ("UTC", "CET")


def test_forced_call_streams_as_a_function_call(front: Server) -> None:
    body = {
        "input": "Weather in Rome?",
        "tools": [WEATHER],
        "tool_choice": "required",
        "max_output_tokens": 64,
        "temperature": 0,
        "stream": True,
    }
    with httpx.stream(
        "POST", f"{front.base_url}/responses", json={"model": ALIAS, **body}, timeout=TIMEOUT
    ) as reply:
        assert reply.status_code == 200
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    types = [event["type"] for event in events]
    assert types[-1] == "response.completed", events[-1]
    assert "response.function_call_arguments.done" in types
    assert "response.output_text.delta" not in types  # the JSON is the call, not text
    final = events[-1]["response"]
    (call,) = final["output"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    jsonschema.validate(json.loads(call["arguments"]), WEATHER["parameters"])
    assert_usage(final["usage"])


# The grammars of the custom tools: a date by regex, an arithmetic expression in Lark.
DATE_REGEX = r"^\d{4}-\d{2}-\d{2}$"
# Bounded, so that the model must end the call (an open-ended sum runs to the token limit).
SUM_LARK = 'start: NUMBER "+" NUMBER\nNUMBER: /[0-9]{1,3}/'


@pytest.mark.parametrize(
    ("syntax", "definition", "matches"),
    [
        ("regex", DATE_REGEX, lambda text: re.fullmatch(DATE_REGEX, text)),
        ("lark", SUM_LARK, lambda text: re.fullmatch(r"[0-9]{1,3}\+[0-9]{1,3}", text)),
    ],
)
def test_a_forced_custom_call_is_decoded_under_its_grammar(
    front: Server, syntax: str, definition: str, matches: Any
) -> None:
    """Both upstreams take a llama.cpp grammar: the call is decoded in its language (the
    bundled model left to itself writes no date and no sum)."""
    tool: CustomToolParam = {
        "type": "custom",
        "name": "note",
        "description": "Write it down.",
        "format": {"type": "grammar", "syntax": cast(Any, syntax), "definition": definition},
    }
    with client(front) as sdk:
        response = sdk.responses.create(
            model=ALIAS,
            input="When is the meeting, and what is two plus two?",
            tools=[tool],
            tool_choice={"type": "custom", "name": "note"},
            max_output_tokens=64,
            temperature=0,
        )
    assert response.status == "completed", response.incomplete_details
    (call,) = [item for item in response.output if item.type == "custom_tool_call"]
    assert call.name == "note" and matches(call.input), call.input


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


def test_langchain_bind_tools_forced_and_required(front: Server) -> None:
    """LangChain's bind_tools(tool_choice=...), the client the issue saw get text back."""
    chat = ChatOpenAI(
        model=ALIAS,
        base_url=front.base_url,
        api_key="unused",  # type: ignore[arg-type]
        use_responses_api=True,
        temperature=0,
        max_tokens=64,  # type: ignore[call-arg]
        max_retries=0,
        timeout=TIMEOUT,
    )
    named = chat.bind_tools([get_weather], tool_choice="get_weather").invoke("Hi there!")
    assert isinstance(named, AIMessage)
    assert [call["name"] for call in named.tool_calls] == ["get_weather"]
    assert isinstance(named.tool_calls[0]["args"]["city"], str)
    # A bound model is typed as giving AIMessage; what it streams are AIMessageChunks.
    chunks = cast(
        list[AIMessageChunk],
        list(chat.bind_tools([get_weather], tool_choice="required").stream("Oslo?")),
    )
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert isinstance(whole, AIMessageChunk)
    assert whole.response_metadata["status"] == "completed"
    assert [call["name"] for call in whole.tool_calls] == ["get_weather"]


def test_usage_is_reported_json_and_streamed(front: Server) -> None:
    reply = post(front, {"input": "Say hello.", "max_output_tokens": 8})
    assert reply.status_code == 200, reply.text
    assert_usage(reply.json()["usage"])
    with client(front) as sdk:
        stream = sdk.responses.create(
            model=ALIAS, input="Say hello.", max_output_tokens=8, stream=True
        )
        ends = ("response.completed", "response.incomplete")
        (terminal,) = [event for event in stream if event.type in ends]
        # The type test above does not narrow the SDK's union of events.
        finished = cast(ResponseCompletedEvent | ResponseIncompleteEvent, terminal)
        assert_usage(finished.response.model_dump(mode="json")["usage"])


def test_a_function_call_output_round_trip_is_accepted(front: Server) -> None:
    """A developer message, an assistant call with no text, and the tool's result."""
    reply = post(
        front,
        {
            "input": [
                {"role": "developer", "content": "Answer in a few words."},
                {"role": "user", "content": "What is the weather in Paris?"},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
            ],
            "tools": [WEATHER],
            "max_output_tokens": 16,
            "temperature": 0,
        },
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["status"] in ("completed", "incomplete")
    assert_usage(body["usage"])


def test_earlier_reasoning_is_accepted(front: Server) -> None:
    reply = post(
        front,
        {
            "input": [
                {"role": "user", "content": "Pick a number."},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "Seven is a fine pick."}],
                },
                {"role": "assistant", "content": "7"},
                {"role": "user", "content": "And another?"},
            ],
            "max_output_tokens": 8,
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] in ("completed", "incomplete")


def test_a_prompt_too_long_is_a_400_context_length_exceeded(front: Server) -> None:
    body: dict[str, Any] = {"input": "word " * 3000, "max_output_tokens": 8}
    reply = post(front, body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "context_length_exceeded",
        "input",
        "invalid_request_error",
    )
    with client(front) as sdk, pytest.raises(openai.BadRequestError):
        sdk.responses.create(model=ALIAS, **body)


def test_truncation_auto_fits_the_upstream_window(front: Server) -> None:
    history = [{"role": "user", "content": f"Note {n}: " + "word " * 500} for n in range(4)]
    body = {"input": [*history, {"role": "user", "content": "Say hi."}], "max_output_tokens": 8}
    assert post(front, body).status_code == 400  # it does not fit as it is
    reply = post(front, {**body, "truncation": "auto"})
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert_usage(usage)
    assert usage["input_tokens"] < 2048
    assert reply.json()["truncation"] == "auto"
