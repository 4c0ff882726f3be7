"""tool_search and defer_loading: which tools the model sees, the items a search is, and
their replay. The search respond runs inside a response is driven by the FAKE
ScriptedEngine (a model that searches, then calls what it found, on demand);
tests/e2e/test_tool_search.py runs the same with the bundled model."""

from __future__ import annotations

import json
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

from respond import assemble, create_app
from respond.engines import _base as d
from respond.metrics import Metrics
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody, InputItem
from respond.protocol.resource import ResponseResource
from respond.responses.context import items_to_messages
from respond.responses.deferred import loading
from respond.responses.events import EventBuilder
from respond.responses.hosted._bm25 import rank, words
from respond.responses.kinds import Kinds, calls_for
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.sse import read_events

EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)


def function(name: str, description: str, deferred: bool = True) -> dict[str, Any]:
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
        "defer_loading": deferred,
    }


WEATHER = function("get_weather", "The weather forecast for a city")
MAIL = function("send_mail", "Send an email message")
CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "The customer database",
    "tools": [function("find_customer", "Look a customer up by city")],
}


def request(*tools: dict[str, Any], **extra: Any) -> CreateResponseBody:
    return CreateResponseBody.model_validate({"tools": list(tools), **extra})


def inputs(*items: dict[str, Any]) -> list[InputItem]:
    body = CreateResponseBody.model_validate({"input": list(items)})
    assert not isinstance(body.input, str)
    return list(body.input)


def test_bm25_ranks_by_name_and_description_words() -> None:
    assert words("getWeather get_weather HTTPServer2") == [
        "get",
        "weather",
        "get",
        "weather",
        "http",
        "server",
        "2",
    ]
    documents = ["send_mail Send an email", "get_weather The weather forecast", "list_files"]
    assert rank("what is the weather", documents) == [1]
    assert sorted(rank("email the forecast", documents)) == [0, 1]
    assert rank("nothing matches", documents) == []


def test_deferred_tools_are_hidden_until_a_search_loads_them() -> None:
    body = request({"type": "tool_search"}, WEATHER, MAIL, CRM, function("now", "Time", False))
    first = loading(body.tools, [])
    assert set(first.hidden) == {"get_weather", "send_mail", "find_customer"}
    # What a search lists is the definition the request gave (a member in its namespace).
    assert first.hidden["get_weather"] == WEATHER
    assert first.hidden["find_customer"]["name"] == "crm"
    assert first.hidden["find_customer"]["tools"][0]["name"] == "find_customer"
    searched = inputs(
        {"type": "tool_search_call", "arguments": {"query": "weather"}, "execution": "server"},
        {"type": "tool_search_output", "tools": [WEATHER, first.hidden["find_customer"]]},
    )
    assert set(loading(body.tools, searched).hidden) == {"send_mail"}


def test_a_clients_search_may_load_a_tool_the_request_lacks() -> None:
    body = request({"type": "tool_search", "execution": "client"}, MAIL)
    lacking = function("get_time", "The time", deferred=False)
    searched = inputs(
        {"type": "tool_search_call", "call_id": "c1", "arguments": {}, "execution": "client"},
        {
            "type": "tool_search_output",
            "call_id": "c1",
            "execution": "client",
            "tools": [lacking],
        },
    )
    seen = loading(body.tools, searched)
    assert [getattr(tool, "name", None) for tool in seen.tools][-1] == "get_time"
    assert set(seen.hidden) == {"send_mail"}


def test_deferred_tools_without_a_tool_search_are_refused() -> None:
    with pytest.raises(APIError) as caught:
        loading(request(WEATHER).tools, [])
    assert caught.value.status == 400 and caught.value.param == "tools"


def test_a_client_search_is_a_tool_search_call_the_sdk_parses() -> None:
    body = request({"type": "tool_search", "execution": "client"}, MAIL)
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls_for(body.tools)))
    events = b.start() + b.push(d.ToolCallStart(call_id="call_1", name="tool_search"))
    events += b.push(d.ToolCallArgumentsDelta('{"query": "mail"}')) + b.push(d.ToolCallEnd())
    events += b.finish()
    assert [e.type for e in events][2:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    for event in events:
        EVENTS.validate_python(event.model_dump(mode="json"))
    (call,) = Response.model_validate(b.response.model_dump(mode="json")).output
    assert isinstance(call, ResponseToolSearchCall)
    assert (call.call_id, call.execution, call.status) == ("call_1", "client", "completed")
    assert call.arguments == {"query": "mail"}


def test_searches_replay_as_calls_and_their_results() -> None:
    items = inputs(
        {"role": "user", "content": "weather?"},
        {"type": "tool_search_call", "id": "tsc_1", "arguments": {"query": "weather"}},
        {"type": "tool_search_output", "id": "tso_1", "tools": [WEATHER]},
        {"type": "tool_search_call", "call_id": "c2", "arguments": {}, "execution": "client"},
        {"type": "tool_search_output", "call_id": "c2", "execution": "client", "tools": []},
    )
    messages = items_to_messages(items, vision=False)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    server_call = messages[1].tool_calls[0]
    assert (server_call.name, server_call.call_id) == ("tool_search", "tsc_1")
    assert json.loads(server_call.arguments) == {"query": "weather"}
    assert messages[2].tool_call_id == "tsc_1" and "get_weather" in messages[2].content
    assert messages[4].tool_call_id == "c2" and messages[4].content == "No tools found."


def test_a_search_respond_runs_is_counted_as_no_client_call() -> None:
    metrics = Metrics()
    response = ResponseResource.model_validate(
        {
            "id": "resp_1",
            "created_at": 1,
            "status": "completed",
            "model": "m",
            "output": [
                {"type": "tool_search_call", "id": "tsc_1", "status": "completed"},
                {"type": "tool_search_output", "id": "tso_1", "status": "completed"},
                {"type": "computer_call", "id": "cu_1", "call_id": "c", "status": "completed"},
            ],
        }
    )
    metrics.run_clock("m").ended(response)
    counted = {
        sample.labels["type"]
        for metric in metrics.registry.collect()
        if metric.name == "respond_tool_calls"
        for sample in metric.samples
        if sample.name.endswith("_total")
    }
    assert counted == {"computer_call"}


PARIS = {"city": "Paris"}


def scripted_search_then_call() -> ScriptedEngine:
    """A FAKE model that searches for the weather, then calls what the search loaded."""
    engine = ScriptedEngine()
    for name, arguments in (("tool_search", {"query": "weather"}), ("get_weather", PARIS)):
        engine.enqueue(
            d.ToolCallStart(call_id=f"call_{name}", name=name),
            d.ToolCallArgumentsDelta(json.dumps(arguments)),
            d.ToolCallEnd(),
            d.Usage(input_tokens=10, output_tokens=5),
            d.Finish("stop"),
        )
    engine.enqueue(
        d.TextDelta("Sunny."), d.Usage(input_tokens=10, output_tokens=2), d.Finish("stop")
    )
    return engine


def test_respond_searches_then_the_model_calls_what_it_loaded() -> None:
    engine = scripted_search_then_call()
    tools = [{"type": "tool_search"}, WEATHER, MAIL, function("now", "The time", False)]
    body = {"input": "Weather in Paris?", "tools": tools, "tool_choice": "required"}
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        with httpx.stream(
            "POST", f"{url}/v1/responses", json={**body, "stream": True}, timeout=30
        ) as reply:
            assert reply.status_code == 200, reply.read()
            events = list(read_events(reply))
        for event in events:
            EVENTS.validate_python(event)
        final = Response.model_validate(events[-1]["response"])
        search, found, call = final.output
        assert isinstance(search, ResponseToolSearchCall)
        assert (search.execution, search.status, search.call_id) == ("server", "completed", None)
        assert search.arguments == {"query": "weather"}
        assert isinstance(found, ResponseToolSearchOutputItem)
        assert [tool.model_dump(exclude_none=True) for tool in found.tools] == [WEATHER]
        assert isinstance(call, ResponseFunctionToolCall) and call.name == "get_weather"
        added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
        assert added == ["tool_search_call", "tool_search_output", "function_call"]
        # The first turn saw no deferred tool; the second, the one the search loaded.
        assert [t.name for t in engine.turns[0].tools] == ["now", "tool_search"]
        # The search names what can be found (as OpenAI shows searchable tools up front).
        described = engine.turns[0].tools[1].description or ""
        assert "- get_weather: The weather forecast for a city" in described
        assert "- send_mail: Send an email message" in described
        assert [t.name for t in engine.turns[1].tools] == ["now", "tool_search", "get_weather"]
        assert engine.turns[1].messages[-1].content.startswith("Loaded these tools")

        # Replayed by the whole input, the loaded tool stays shown.
        answer = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}
        history = [
            {"role": "user", "content": "Weather in Paris?"},
            *events[-1]["response"]["output"],
        ]
        again = httpx.post(
            f"{url}/v1/responses",
            json={"input": [*history, answer], "tools": tools, "store": False},
            timeout=30,
        )
        assert again.status_code == 200, again.text
    assert [t.name for t in engine.turns[2].tools] == ["get_weather", "now", "tool_search"]
    roles = [m.role for m in engine.turns[2].messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]


def test_a_search_loads_a_namespace_member_called_with_its_namespace() -> None:
    engine = ScriptedEngine()
    for name, arguments in (("tool_search", {"query": "customer"}), ("find_customer", PARIS)):
        engine.enqueue(
            d.ToolCallStart(call_id=f"call_{name}", name=name),
            d.ToolCallArgumentsDelta(json.dumps(arguments)),
            d.ToolCallEnd(),
            d.Usage(input_tokens=10, output_tokens=5),
            d.Finish("stop"),
        )
    body = {"input": "Who is in Paris?", "tools": [{"type": "tool_search"}, CRM]}
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        reply = httpx.post(f"{url}/v1/responses", json={**body, "tool_choice": "required"})
        # OpenAI's tool_choice has no type that forces a search.
        forced = {**body, "tool_choice": {"type": "tool_search"}}
        refused = httpx.post(f"{url}/v1/responses", json=forced)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tool_choice"
    assert reply.status_code == 200, reply.text
    assert "- crm: The customer database" in (engine.turns[0].tools[0].description or "")
    _, found, call = Response.model_validate(reply.json()).output
    assert isinstance(found, ResponseToolSearchOutputItem)
    (namespace,) = found.tools
    assert namespace.type == "namespace" and namespace.name == "crm"
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.namespace, call.name) == ("crm", "find_customer")
