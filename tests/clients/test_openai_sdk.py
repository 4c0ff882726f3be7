"""The official `openai` Python SDK against the real server: every object it gets back parses.

The SDK builds its objects without validation, so a wrong shape would only show up later
as a missing attribute or a serialization warning. Each test therefore also validates the
raw JSON with the SDK's own pydantic types (strict parse), and pytest turns warnings into
errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputMessage,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)
from openai.types.responses.responses_server_event import ResponsesServerEvent
from pydantic import BaseModel, TypeAdapter

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server

EVENT: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
WS_EVENT: TypeAdapter[ResponsesServerEvent] = TypeAdapter(ResponsesServerEvent)
# Greedy decoding of this prompt ends on its own in a few tokens with the bundled model, so
# runs complete (clients such as the stream helper insist on response.completed).
PROMPT = "Reply with one word: yes or no?"
SHORT: dict[str, Any] = {"max_output_tokens": 16, "temperature": 0}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as sdk:
        yield sdk


def strict_parse(response: Response) -> Response:
    """Validate what the SDK built without validation; raises on any shape it does not know."""
    raw = response.model_dump(mode="json", exclude_unset=True)
    validate_response(raw)
    return Response.model_validate(raw)


def test_create_parses(client: openai.OpenAI) -> None:
    response = client.responses.create(model=BUNDLED_ALIAS, input=PROMPT, **SHORT)
    parsed = strict_parse(response)
    assert parsed.status in ("completed", "incomplete")
    message = parsed.output[0]
    assert isinstance(message, ResponseOutputMessage)
    assert parsed.output_text == response.output_text and response.output_text
    assert parsed.usage is not None and parsed.usage.output_tokens > 0


def test_create_stream_events_parse(client: openai.OpenAI) -> None:
    stream = client.responses.create(model=BUNDLED_ALIAS, input=PROMPT, stream=True, **SHORT)
    events = list(stream)
    for event in events:
        raw = event.model_dump(mode="json", exclude_unset=True)
        validate_event(raw)
        # The SDK's discriminated union must map each event to its own class.
        assert type(EVENT.validate_python(raw)) is type(event)
    assert isinstance(events[-1], ResponseCompletedEvent | ResponseIncompleteEvent)
    text = "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent))
    assert events[-1].response.output_text == text


def test_stream_helper_final_response(client: openai.OpenAI) -> None:
    with client.responses.stream(model=BUNDLED_ALIAS, input=PROMPT, **SHORT) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert strict_parse(final).output_text == "".join(deltas)


async def test_async_client_streams(server: Server) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as sdk:
        stream = await sdk.responses.create(model=BUNDLED_ALIAS, input=PROMPT, stream=True, **SHORT)
        types = [event.type async for event in stream]
    assert types[0] == "response.created" and types[-1] in (
        "response.completed",
        "response.incomplete",
    )


def test_websocket_connection(client: openai.OpenAI) -> None:
    with client.responses.connect() as conn:
        conn.response.create(model=BUNDLED_ALIAS, input=PROMPT, store=False, **SHORT)
        events = []
        for event in conn:
            events.append(event)
            if event.type in ("response.completed", "response.incomplete", "error"):
                break
    for event in events:
        raw = event.model_dump(mode="json", exclude_unset=True)
        assert type(WS_EVENT.validate_python(raw)) is type(event)
    assert events[-1].type == "response.completed"


def test_errors_are_typed(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="no-such-model", input="Hi")
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=BUNDLED_ALIAS, input="Hi", temperature=5)
    assert bad.value.param == "temperature"


def test_forced_function_call_parses(client: openai.OpenAI, server: Server) -> None:
    response = client.responses.create(  # type: ignore[call-overload]
        model=BUNDLED_ALIAS,
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,  # one call, not the tiny model repeating it
        max_output_tokens=48,
    )
    call = strict_parse(response).output[0]
    assert isinstance(call, ResponseFunctionToolCall)
    assert call.name == "get_weather" and call.call_id


class City(BaseModel):
    name: str
    population: int


def test_parse_structured_output(client: openai.OpenAI, server: Server) -> None:
    response = client.responses.parse(
        model=BUNDLED_ALIAS,
        input="Name a city and its population.",
        text_format=City,
        max_output_tokens=64,
        temperature=0,
    )
    assert isinstance(response.output_parsed, City)


def test_stored_response_round_trip_parses(client: openai.OpenAI, server: Server) -> None:
    created = client.responses.create(model=BUNDLED_ALIAS, input="Say hi.", **SHORT)
    fetched = strict_parse(client.responses.retrieve(created.id))
    assert fetched.id == created.id and fetched.output_text == created.output_text
    items = client.responses.input_items.list(created.id)
    assert [item.type for item in items.data] == ["message"]
    chained = client.responses.create(
        model=BUNDLED_ALIAS, input="Again.", previous_response_id=created.id, **SHORT
    )
    assert strict_parse(chained).previous_response_id == created.id
    client.responses.delete(created.id)  # returns None; a failure raises
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
