"""tool_search and defer_loading with the bundled model.

Deferred tools are not shown until a search loads them. A search respond runs is a
`tool_search_call` then a `tool_search_output` inside the response; a client's search is a
`tool_search_call` it answers with the tools it loads. Every event and response parses
with the openai SDK's own types; the loaded tools stay loaded when the conversation goes on
by previous_response_id and by the whole input.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseStreamEvent,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
)
from pydantic import TypeAdapter

from tests.support.server import Server
from tests.support.sse import read_events

MODEL = "smollm2-135m"
TIMEOUT = 900
EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
QUESTION = "What is the weather in Paris?"
# Asked so, the bundled model searches with words of the tool it needs (at temperature 0).
SEARCH = "Find a tool for the weather."


def deferred(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
        "defer_loading": True,
    }


WEATHER = deferred("get_weather", "Get the weather in a city")
MAIL = deferred("send_mail", "Send an email to a person")


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST",
        f"{server.base_url}/responses",
        json={"model": MODEL, "temperature": 0, **body, "stream": True},
        timeout=TIMEOUT,
    ) as reply:
        assert reply.status_code == 200, reply.read()
        events = list(read_events(reply))
    for event in events:
        EVENTS.validate_python(event)
    return events


def post(server: Server, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    reply = httpx.post(
        f"{server.base_url}/responses",
        json={"model": MODEL, "temperature": 0, **body},
        timeout=TIMEOUT,
    )
    assert reply.status_code == status, reply.text
    data: dict[str, Any] = reply.json()
    if status == 200:
        Response.model_validate(data)
    return data


def forced_weather(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    """A turn that must call get_weather: only possible once a search has loaded it."""
    choice = {"type": "function", "name": "get_weather"}
    return post(server, {**body, "tool_choice": choice, "max_output_tokens": 48})


def test_respond_searches_the_deferred_tools_inside_the_response(server: Server) -> None:
    tools = [{"type": "tool_search"}, WEATHER, MAIL]
    events = stream(
        server,
        {"input": SEARCH, "tools": tools, "tool_choice": "required", "max_output_tokens": 96},
    )
    final = Response.model_validate(events[-1]["response"])
    search, found, *rest = final.output
    assert isinstance(search, ResponseToolSearchCall)
    assert (search.execution, search.status, search.call_id) == ("server", "completed", None)
    assert isinstance(search.arguments, dict) and search.arguments.get("query")
    assert isinstance(found, ResponseToolSearchOutputItem) and found.execution == "server"
    # The tool whose name and description share the query's words, as the request gave it.
    assert "weather" in str(search.arguments["query"]).lower()
    loaded = [tool.model_dump(exclude_none=True) for tool in found.tools]
    assert loaded == [WEATHER]
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added[:2] == ["tool_search_call", "tool_search_output"]
    # What the model did next was with the loaded tools only (or an answer).
    for item in rest:
        if isinstance(item, ResponseFunctionToolCall):
            assert item.name in [tool["name"] for tool in loaded]
    echoed = events[-1]["response"]["tools"]
    assert [t["type"] for t in echoed] == ["tool_search", "function", "function"]
    assert echoed[1]["defer_loading"] is True

    stored = httpx.get(f"{server.base_url}/responses/{final.id}", timeout=TIMEOUT).json()
    assert stored["output"] == events[-1]["response"]["output"]


def test_a_deferred_tool_cannot_be_forced_before_a_search_loads_it(server: Server) -> None:
    tools = [{"type": "tool_search", "execution": "client"}, WEATHER]
    refused = post(
        server,
        {
            "input": QUESTION,
            "tools": tools,
            "tool_choice": {"type": "function", "name": "get_weather"},
        },
        status=400,
    )
    assert refused["error"]["param"] == "tool_choice.name"
    alone = post(server, {"input": QUESTION, "tools": [WEATHER]}, status=400)
    assert alone["error"]["param"] == "tools"


@pytest.mark.parametrize("chained", [True, False], ids=["previous_response_id", "full_input"])
def test_a_clients_search_round_trips_and_loads_its_tools(server: Server, chained: bool) -> None:
    tools = [{"type": "tool_search", "execution": "client"}, WEATHER, MAIL]
    events = stream(
        server,
        {"input": QUESTION, "tools": tools, "tool_choice": "required", "max_output_tokens": 64},
    )
    final = Response.model_validate(events[-1]["response"])
    (search,) = final.output
    assert isinstance(search, ResponseToolSearchCall)
    assert search.execution == "client" and search.status == "completed"
    assert search.call_id and isinstance(search.arguments, dict)
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added == ["tool_search_call"]

    answer = {
        "type": "tool_search_output",
        "call_id": search.call_id,
        "execution": "client",
        "status": "completed",
        "tools": [WEATHER],
    }
    body: dict[str, Any]
    if chained:
        body = {"previous_response_id": final.id, "input": [answer], "tools": tools}
    else:
        history = [{"role": "user", "content": QUESTION}, events[-1]["response"]["output"][0]]
        body = {"input": [*history, answer], "tools": tools, "store": False}
    weather = forced_weather(server, body)
    call = Response.model_validate(weather).output[-1]
    assert isinstance(call, ResponseFunctionToolCall) and call.name == "get_weather"


def test_a_search_respond_ran_keeps_its_tools_loaded_when_chained(server: Server) -> None:
    """The stored tool_search_output loads its tools for the next turn: get_weather, which
    could not be forced before, can be now."""
    tools = [{"type": "tool_search"}, WEATHER, MAIL]
    first = post(
        server,
        {"input": SEARCH, "tools": tools, "tool_choice": "required", "max_output_tokens": 96},
    )
    found = [item for item in first["output"] if item["type"] == "tool_search_output"]
    assert [[tool["name"] for tool in item["tools"]] for item in found] == [["get_weather"]]
    calls = [i for i in first["output"] if i["type"] == "function_call"]
    answers = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": "Sunny"} for c in calls
    ]
    body = {"previous_response_id": first["id"], "input": answers or QUESTION, "tools": tools}
    weather = forced_weather(server, body)
    assert weather["output"][-1]["name"] == "get_weather"
    # send_mail was not loaded: it still cannot be named.
    mail = {"type": "function", "name": "send_mail"}
    refused = post(server, {**body, "tool_choice": mail}, status=400)
    assert refused["error"]["param"] == "tool_choice.name"
