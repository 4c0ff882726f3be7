"""The file_search tool inside responses, on the bundled model, through the official SDK.

The search is forced (tool_choice), so even the tiny model makes one: respond runs it
over the vector store, the chunks join the context, and the model answers in the same
response. Every body and event is checked (the SDK's types for OpenAI's file_search
shapes, the Open Responses schema for the rest).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.clients import openai_client
from tests.support.schema import validate_event
from tests.support.server import Server, start_server
from tests.support.sse import read_events

MODEL = "smollm2-135m"
TIMEOUT = 900  # generous: a loaded two-core machine is slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    keys = Path(tmp_path_factory.mktemp("keys")) / "keys"
    keys.write_text("alice:key-alice\nbob:key-bob\n")
    srv = start_server(
        Path(tmp_path_factory.mktemp("file-search")), "--threads", "2", "--api-key-file", str(keys)
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url, api_key="key-alice", timeout=TIMEOUT) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def store_id(client: openai.OpenAI) -> str:
    store = client.vector_stores.create(name="birds")
    for name, text in [
        ("heron.md", b"# Herons\n\nThe grey heron hunts fish in shallow water at dawn."),
        ("kettle.txt", b"A kettle boils water for tea in three minutes."),
    ]:
        entry = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=(name, text)
        )
        assert entry.status == "completed"
    return store.id


def tool(store_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "file_search", "vector_store_ids": [store_id], **extra}


def ask(client: openai.OpenAI, store_id: str, **kw: Any) -> Any:
    kw.setdefault("tools", [tool(store_id)])
    kw.setdefault("tool_choice", {"type": "file_search"})
    return client.responses.create(
        model=MODEL,
        input="Where does the grey heron hunt?",
        # Room for the search call (the bundled model may write long queries) and the answer.
        max_output_tokens=500,
        temperature=0,
        **kw,
    )


def test_a_forced_search_runs_and_the_answer_cites_the_files(
    client: openai.OpenAI, store_id: str
) -> None:
    response = ask(client, store_id, include=["file_search_call.results"])
    assert response.status in ("completed", "incomplete"), response.error
    search = response.output[0]
    assert search.type == "file_search_call" and search.status == "completed"
    assert search.queries and all(isinstance(q, str) and q for q in search.queries)
    assert search.results, "the store has files: a search returns chunks"
    assert {r.filename for r in search.results} <= {"heron.md", "kettle.txt"}
    assert all(r.file_id and r.text and 0 <= (r.score or 0) <= 1 for r in search.results)
    # The model answered after the search, in the same response, citing what it was given.
    messages = [item for item in response.output[1:] if item.type == "message"]
    assert messages, [item.type for item in response.output]
    notes = messages[-1].content[0].annotations
    assert {n.filename for n in notes} == {r.filename for r in search.results}
    assert all(
        n.type == "file_citation" and n.index == len(messages[-1].content[0].text) for n in notes
    )
    # Stored: GET answers the same output.
    stored = client.responses.retrieve(response.id)
    assert stored.output[0].model_dump() == search.model_dump()
    # Without `include`, the item keeps no results.
    plain = ask(client, store_id)
    assert plain.output[0].type == "file_search_call" and plain.output[0].results is None


def test_streaming_events_and_a_chained_turn(
    server: Server, client: openai.OpenAI, store_id: str
) -> None:
    body = {
        "model": MODEL,
        "input": "What boils water?",
        "tools": [tool(store_id)],
        "tool_choice": "required",
        "include": ["file_search_call.results"],
        "max_output_tokens": 300,  # the bundled model may write long queries
        "temperature": 0,
        "stream": True,
    }
    with httpx.stream(
        "POST",
        f"{server.base_url}/responses",
        json=body,
        headers={"Authorization": "Bearer key-alice"},
        timeout=TIMEOUT,
    ) as reply:
        assert reply.status_code == 200, reply.read()
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    item_id = next(
        e["item"]["id"]
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "file_search_call"
    )
    of_item = [
        e["type"]
        for e in events
        if e.get("item_id") == item_id or e.get("item", {}).get("id") == item_id
    ]
    assert of_item == [
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
    ]
    final = events[-1]["response"]
    assert final["output"][0]["type"] == "file_search_call" and final["output"][0]["results"]
    # The next turn chains on it: the search and its results are in its context.
    follow = client.responses.create(
        model=MODEL,
        input="Say it again.",
        previous_response_id=final["id"],
        max_output_tokens=8,
        temperature=0,
    )
    assert follow.status in ("completed", "incomplete")
    first = client.responses.input_tokens.count(model=MODEL, previous_response_id=final["id"])
    bare = client.responses.input_tokens.count(model=MODEL, input="What boils water?")
    assert first.input_tokens > bare.input_tokens  # the search results are part of it


def test_bad_file_search_tools_name_the_param(server: Server, store_id: str) -> None:
    def post(tools: list[Any], api_key: str = "key-alice", **kw: Any) -> httpx.Response:
        return httpx.post(
            f"{server.base_url}/responses",
            json={"model": MODEL, "input": "x", "tools": tools, "max_output_tokens": 4, **kw},
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=TIMEOUT,
        )

    for tools, status, param in [
        ([tool("vs_nope")], 404, "tools[0].vector_store_ids"),
        ([{"type": "file_search"}], 400, "tools[0].vector_store_ids"),
        ([tool(store_id, max_num_results=0)], 400, "tools[0].max_num_results"),
        (
            [tool(store_id, filters={"type": "in", "key": "a", "value": 1})],
            400,
            "tools[0].filters.value",
        ),
        ([tool(store_id), tool(store_id)], 400, "tools[1]"),
    ]:
        reply = post(tools)
        assert reply.status_code == status, (tools, reply.text)
        assert reply.json()["error"]["param"] == param, reply.json()
    # Another tenant's vector store is a 404, as if it did not exist.
    reply = post([tool(store_id)], api_key="key-bob")
    assert reply.status_code == 404
    assert reply.json()["error"]["param"] == "tools[0].vector_store_ids"
    reply = post([], tool_choice={"type": "file_search"})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "tool_choice"
