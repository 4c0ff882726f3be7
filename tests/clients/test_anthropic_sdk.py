"""The official `anthropic` Python SDK against the real server and bundled model.

The SDK builds its objects without validation, so each test also parses the raw JSON with
the SDK's own pydantic types and insists nothing was unknown or left over; pytest turns
warnings into errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, MessageTokensCount, RawMessageStreamEvent
from pydantic import BaseModel, TypeAdapter

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server, start_server

EVENT: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)
PROMPT = "Reply with one word: yes or no?"
# This SDK has no `temperature` argument any more; the API still takes it (greedy here).
SHORT: dict[str, Any] = {
    "model": BUNDLED_ALIAS,
    "max_tokens": 16,
    "extra_body": {"temperature": 0},
}
WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
FORCE: Any = {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}
KEY = "anthropic-sdk-key"


@pytest.fixture
def client(server: Server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as sdk:
        yield sdk


def strict(model: type[BaseModel], raw: Any) -> Any:
    parsed = model.model_validate(raw)
    assert parsed.model_dump(mode="json", exclude_unset=True) == raw
    return parsed


def create(client: anthropic.Anthropic, **kwargs: Any) -> Message:
    raw = client.messages.with_raw_response.create(**{**SHORT, **kwargs})
    message: Message = strict(Message, raw.http_response.json())
    assert raw.parse().id == message.id
    return message


def test_messages_create(client: anthropic.Anthropic) -> None:
    message = create(client, messages=[{"role": "user", "content": PROMPT}])
    assert message.id.startswith("msg_") and message.model == BUNDLED_ALIAS
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.output_tokens >= 1


def test_messages_stream_final_message_is_the_streamed_deltas(
    client: anthropic.Anthropic,
) -> None:
    with client.messages.stream(**SHORT, messages=[{"role": "user", "content": PROMPT}]) as run:
        texts = list(run.text_stream)
        final = run.get_final_message()
    assert texts and final.content[0].type == "text"
    assert final.content[0].text == "".join(texts)
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.output_tokens >= 1
    whole = create(client, messages=[{"role": "user", "content": PROMPT}])
    assert whole.content[0].type == "text"
    assert (final.content[0].text, final.stop_reason) == (whole.content[0].text, whole.stop_reason)


def test_every_stream_event_parses(client: anthropic.Anthropic) -> None:
    with client.messages.create(
        **SHORT, messages=[{"role": "user", "content": PROMPT}], stream=True
    ) as stream:
        events = list(stream)
    assert [e.type for e in events][:2] == ["message_start", "content_block_start"]
    assert events[-1].type == "message_stop"
    for event in events:  # built unvalidated by the SDK: validate what it got
        raw = event.model_dump(mode="json", exclude_unset=True)
        assert EVENT.validate_python(raw).model_dump(mode="json", exclude_unset=True) == raw


def test_a_forced_tool_call_and_its_result(client: anthropic.Anthropic) -> None:
    question: Any = {"role": "user", "content": "What is the weather in Paris?"}
    called = create(client, max_tokens=40, tools=[WEATHER], tool_choice=FORCE, messages=[question])
    assert called.stop_reason == "tool_use"
    (call,) = [block for block in called.content if block.type == "tool_use"]
    assert call.name == "get_weather" and isinstance(call.input, dict)
    assert set(call.input) == {"city"}
    result: Any = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 C"}],
    }
    answer = create(
        client,
        tools=[WEATHER],
        messages=[question, {"role": "assistant", "content": called.content}, result],
    )
    assert answer.content and answer.content[0].type == "text"


def test_a_streamed_tool_call(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        **{**SHORT, "max_tokens": 40},
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    ) as run:
        final = run.get_final_message()
    (call,) = [block for block in final.content if block.type == "tool_use"]
    assert set(call.input) == {"city"}  # the SDK assembled it from input_json_delta
    assert final.stop_reason == "tool_use"


def test_count_tokens(client: anthropic.Anthropic) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    raw = client.messages.with_raw_response.count_tokens(model=BUNDLED_ALIAS, messages=messages)
    counted: MessageTokensCount = strict(MessageTokensCount, raw.http_response.json())
    usage = create(client, messages=messages).usage
    assert counted.input_tokens == usage.input_tokens + (usage.cache_read_input_tokens or 0)


def test_errors_are_the_sdks_exception_classes(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        create(client, model="claude-nope", messages=[{"role": "user", "content": "x"}])
    assert "claude-nope" in missing.value.message
    assert missing.value.request_id is not None and missing.value.request_id.startswith("req_")
    with pytest.raises(anthropic.BadRequestError) as bad:
        create(
            client,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
            messages=[{"role": "user", "content": "x"}],
        )
    assert "web_search_20250305" in bad.value.message
    assert isinstance(bad.value.body, dict) and bad.value.body["type"] == "error"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("anthropic-keyed")), "--threads", "2", "--api-key", KEY
    )
    yield srv
    srv.stop()


def test_the_api_key_authenticates(keyed: Server) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    with anthropic.Anthropic(base_url=keyed.url, api_key=KEY, max_retries=0) as sdk:
        assert sdk.messages.count_tokens(model=BUNDLED_ALIAS, messages=messages).input_tokens
    with anthropic.Anthropic(base_url=keyed.url, auth_token=KEY, max_retries=0) as sdk:
        assert sdk.messages.count_tokens(model=BUNDLED_ALIAS, messages=messages).input_tokens
    with (
        anthropic.Anthropic(base_url=keyed.url, api_key="wrong", max_retries=0) as sdk,
        pytest.raises(anthropic.AuthenticationError),
    ):
        sdk.messages.count_tokens(model=BUNDLED_ALIAS, messages=messages)
