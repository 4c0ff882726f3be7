"""Stored responses, chains, conversations and compaction through the official SDK.

On SQLite: the store contract (tests/unit/test_store.py) holds PostgreSQL to the same
behaviour, and tests/e2e/test_store_load.py runs the server on both.
Context composition is checked with POST /v1/responses/input_tokens, which counts with
the model's own tokenizer and chat template: a chained request must cost exactly what
the same items sent explicitly cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import EasyInputMessageParam

from tests.support.clients import openai_client
from tests.support.schema import validate, validate_event, validate_response
from tests.support.server import Server, start_server

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(Path(tmp_path_factory.mktemp("state")), "--threads", "2")
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url) as sdk:
        yield sdk


def create(client: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("model", MODEL)
    kw.setdefault("max_output_tokens", 8)
    kw.setdefault("temperature", 0)
    response = client.responses.create(**kw)
    validate_response(response.model_dump(mode="json", exclude_unset=True))
    return response


def tokens(client: openai.OpenAI, **kw: Any) -> int:
    counted = client.responses.input_tokens.count(model=MODEL, **kw)
    assert counted.object == "response.input_tokens"
    return int(counted.input_tokens)


def as_input(items: list[Any]) -> list[dict[str, Any]]:
    """Stored items (SDK objects) as input items, the way a client would echo them."""
    out = []
    for item in items:
        data = item.model_dump(mode="json", exclude_none=True)
        if data["type"] == "message":
            data["content"] = [
                {"type": part["type"], "text": part["text"]} for part in data["content"]
            ]
        out.append(data)
    return out


def user(text: str) -> EasyInputMessageParam:
    return {"type": "message", "role": "user", "content": text}


# ---------------------------------------------------------------- responses


def test_retrieve_is_what_create_returned(client: openai.OpenAI) -> None:
    made = create(client, input="Say hi.", metadata={"k": "v"})
    got = client.responses.retrieve(made.id)
    assert got.model_dump() == made.model_dump()
    raw = httpx.get(
        f"{client.base_url}responses/{made.id}",
        params={"include[]": "message.output_text.logprobs"},
    )
    assert raw.status_code == 200
    validate_response(raw.json())


def test_store_false_keeps_nothing(client: openai.OpenAI) -> None:
    made = create(client, input="Say hi.", store=False)
    assert made.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError) as missing:
        create(client, input="again", previous_response_id=made.id)
    assert missing.value.body["code"] == "previous_response_not_found"  # type: ignore[index]
    assert missing.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_delete(client: openai.OpenAI, server: Server) -> None:
    made = create(client, input="Say hi.")
    reply = httpx.delete(f"{server.base_url}/responses/{made.id}")
    assert reply.json() == {"id": made.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(made.id)


def test_input_items_pages(client: openai.OpenAI) -> None:
    texts = [f"Item {i}." for i in range(5)]
    made = create(client, input=[user(t) for t in texts], instructions="Be brief.")
    listed = client.responses.input_items.list(made.id)
    assert [item.content[0].text for item in listed.data] == texts[::-1]  # type: ignore[union-attr, index]
    assert listed.has_more is False
    first = client.responses.input_items.list(made.id, limit=2, order="asc")
    assert [i.content[0].text for i in first.data] == texts[:2]  # type: ignore[union-attr, index]
    assert first.has_more is True and first.first_id == first.data[0].id  # type: ignore[attr-defined]
    second = client.responses.input_items.list(made.id, limit=2, order="asc", after=first.last_id)  # type: ignore[attr-defined]
    assert [i.content[0].text for i in second.data] == texts[2:4]  # type: ignore[union-attr, index]
    every = list(client.responses.input_items.list(made.id, limit=2, order="asc"))
    assert [i.content[0].text for i in every] == texts  # type: ignore[union-attr, index]
    assert all(item.id.startswith("msg_") for item in every)
    for bad in ({"limit": 0}, {"limit": 101}, {"order": "up"}, {"after": "msg_nope"}):
        with pytest.raises(openai.BadRequestError) as error:
            client.responses.input_items.list(made.id, **bad)
        assert error.value.body["param"] == next(iter(bad))  # type: ignore[index]


def test_stream_resume_replays_stored_events(client: openai.OpenAI, server: Server) -> None:
    events = list(
        client.responses.create(
            model=MODEL, input="Count to three.", max_output_tokens=8, stream=True
        )
    )
    original = [e.model_dump(mode="json", exclude_unset=True) for e in events]
    response_id = original[0]["response"]["id"]
    resumed = list(client.responses.retrieve(response_id, stream=True, starting_after=3))
    tail = [e.model_dump(mode="json", exclude_unset=True) for e in resumed]
    assert tail == original[4:]
    for event in tail:
        validate_event(event)
    whole = httpx.get(f"{server.base_url}/responses/{response_id}", params={"stream": "true"})
    assert whole.headers["content-type"].startswith("text/event-stream")
    assert whole.text.count("event: ") == len(original)


# ---------------------------------------------------------------- previous_response_id


def test_chain_context_is_inputs_then_outputs_and_keeps_tool_items(client: openai.OpenAI) -> None:
    tool_turn = [
        user("What is the weather in Paris?"),
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21C"},
    ]
    first = create(client, input=tool_turn, instructions="You are a weather bot.")
    second = create(client, input="And tomorrow?", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    assert second.instructions is None
    explicit = [
        *as_input(client.responses.input_items.list(first.id, order="asc").data),
        *as_input(first.output),
        user("And tomorrow?"),
        *as_input(second.output),
        user("Thanks."),
    ]
    chained = tokens(client, previous_response_id=second.id, input="Thanks.")
    assert chained == tokens(client, input=explicit)
    # Instructions are not inherited: with them the explicit form costs something else.
    assert chained != tokens(client, input=explicit, instructions="You are a weather bot.")
    third = create(client, previous_response_id=second.id, input="Thanks.")
    assert third.usage is not None and third.usage.input_tokens == chained


def test_chain_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        create(client, input="x", previous_response_id="resp_unknown")
    assert missing.value.body["code"] == "previous_response_not_found"  # type: ignore[index]
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError) as both:
        create(client, input="x", previous_response_id="resp_1", conversation=conversation.id)
    assert both.value.body["param"] == "conversation"  # type: ignore[index]


def test_item_reference_resolves_from_the_store(client: openai.OpenAI) -> None:
    first = create(client, input="Remember: blue.")
    said = first.output[0]
    made = create(
        client, input=[{"type": "item_reference", "id": said.id}, user("What did you say?")]
    )
    listed = client.responses.input_items.list(made.id, order="asc").data
    assert listed[0].id == said.id and listed[0].type == "message"
    assert listed[0].content[0].text == said.content[0].text  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError) as missing:
        create(client, input=[{"type": "item_reference", "id": "msg_nope"}])
    assert missing.value.body["code"] == "item_not_found"  # type: ignore[index]
    assert missing.value.body["param"] == "input[0].id"  # type: ignore[index]


# ---------------------------------------------------------------- conversations


def test_conversation_lifecycle(client: openai.OpenAI, server: Server) -> None:
    conv = client.conversations.create(items=[user("My name is Ada.")], metadata={"topic": "names"})
    assert conv.id.startswith("conv_") and conv.object == "conversation"
    assert client.conversations.retrieve(conv.id).metadata == {"topic": "names"}
    updated = client.conversations.update(conv.id, metadata={"topic": "intro"})
    assert updated.metadata == {"topic": "intro"}
    added = client.conversations.items.create(conv.id, items=[user("I like tea."), user("Hi!")])
    assert [i.content[0].text for i in added.data] == ["I like tea.", "Hi!"]  # type: ignore[union-attr, index]
    items = client.conversations.items.list(conv.id, order="asc")
    assert [i.content[0].text for i in items.data] == ["My name is Ada.", "I like tea.", "Hi!"]  # type: ignore[union-attr, index]
    page = client.conversations.items.list(conv.id, limit=1)
    assert page.has_more and page.data[0].content[0].text == "Hi!"  # type: ignore[union-attr, index]
    hi = items.data[2]
    assert hi.id is not None
    assert client.conversations.items.retrieve(hi.id, conversation_id=conv.id).id == hi.id
    after_delete = client.conversations.items.delete(hi.id, conversation_id=conv.id)
    assert after_delete.id == conv.id
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(hi.id, conversation_id=conv.id)

    expected = tokens(
        client, input=[user("My name is Ada."), user("I like tea."), user("Who am I?")]
    )
    assert tokens(client, conversation=conv.id, input="Who am I?") == expected
    answer = create(client, conversation=conv.id, input="Who am I?")
    assert answer.conversation is not None and answer.conversation.id == conv.id
    again = create(client, conversation={"id": conv.id}, input="Bye.")
    assert again.conversation is not None and again.conversation.id == conv.id
    texts = [
        (i.role, i.content[0].text)  # type: ignore[union-attr, index]
        for i in client.conversations.items.list(conv.id, order="asc", limit=100)
    ]
    assert texts == [
        ("user", "My name is Ada."),
        ("user", "I like tea."),
        ("user", "Who am I?"),
        ("assistant", answer.output_text),
        ("user", "Bye."),
        ("assistant", again.output_text),
    ]
    gone = client.conversations.delete(conv.id)
    assert (gone.id, gone.object, gone.deleted) == (conv.id, "conversation.deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)
    with pytest.raises(openai.NotFoundError) as missing:
        create(client, conversation=conv.id, input="Hello?")
    assert missing.value.body["param"] == "conversation"  # type: ignore[index]
    reply = httpx.post(f"{server.base_url}/conversations/{conv.id}", json={"metadata": {}})
    assert reply.status_code == 404


def test_conversation_bad_input(server: Server) -> None:
    reply = httpx.post(f"{server.base_url}/conversations", json={"metadata": {"k" * 65: "v"}})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "metadata"
    reply = httpx.post(f"{server.base_url}/conversations", json={"items": [{"type": "bogus"}]})
    assert reply.status_code == 400 and reply.json()["error"]["param"].startswith("items[0]")


# ---------------------------------------------------------------- compaction


def test_compaction_restores_the_context(client: openai.OpenAI, server: Server) -> None:
    first = create(client, input="My favourite number is 7.")
    reply = httpx.post(
        f"{server.base_url}/responses/compact",
        json={"model": MODEL, "previous_response_id": first.id, "input": "Noted?"},
    )
    assert reply.status_code == 200, reply.text
    compacted = reply.json()
    validate(compacted, "CompactResource")
    assert compacted["object"] == "response.compaction"
    # OpenAI's shape: the user messages verbatim, then one compaction item for everything.
    *kept, item = compacted["output"]
    assert [(m["type"], m["role"], m["content"][0]["text"]) for m in kept] == [
        ("message", "user", "My favourite number is 7."),
        ("message", "user", "Noted?"),
    ]
    assert item["type"] == "compaction" and "favourite" not in item["encrypted_content"]
    sdk = client.responses.compact(model=MODEL, previous_response_id=first.id, input="Noted?")
    assert [o.type for o in sdk.output] == ["message", "message", "compaction"]

    restored = tokens(client, input=[item, user("So?")])
    explicit = tokens(
        client,
        previous_response_id=first.id,
        input=[user("Noted?"), user("So?")],
    )
    assert restored == explicit
    # A client that replaces its history with the output and goes on reads the same context.
    replaced = [*compacted["output"], user("So?")]
    assert tokens(client, input=replaced) == restored
    answer = create(client, input=replaced)
    assert answer.usage is not None and answer.usage.input_tokens == restored
    chained = tokens(client, previous_response_id=answer.id, input=[user("And?")])
    assert chained > restored  # the chain reads on from the compacted context

    tampered = {**item, "encrypted_content": item["encrypted_content"][:-8] + "AAAAAAA="}
    with pytest.raises(openai.BadRequestError):
        tokens(client, input=[tampered])
    # The SDK types `model` nullable here; left out or null, the default model compacts.
    defaulted = httpx.post(f"{server.base_url}/responses/compact", json={"input": "x"})
    assert defaulted.status_code == 200 and defaulted.json()["output"][-1]["type"] == "compaction"


def test_concurrent_turns_on_one_conversation(client: openai.OpenAI) -> None:
    from concurrent.futures import ThreadPoolExecutor

    conv = client.conversations.create(items=[user("Start.")])

    def one(i: int) -> str:
        return str(create(client, conversation=conv.id, input=f"Turn {i}.", max_output_tokens=4).id)

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(8)))
    for response_id in ids:
        assert client.responses.retrieve(response_id).conversation.id == conv.id  # type: ignore[union-attr]
    items = list(client.conversations.items.list(conv.id, order="asc", limit=100))
    assert len(items) == 1 + 8 * 2
    assert len({item.id for item in items}) == len(items)
    asked = sorted(i.content[0].text for i in items if i.role == "user")  # type: ignore[union-attr, index]
    assert asked == sorted(["Start.", *(f"Turn {i}." for i in range(8))])
