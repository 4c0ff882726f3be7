"""Compaction inside a run (`context_management`) on the real server and the bundled model.

On SQLite (the store contract, tests/unit/test_store.py, holds PostgreSQL to the same
behaviour). The bundled model writes poor summaries; the tests check the mechanics: the
item the openai SDK parses with its own types, what it carries (the tests know the server's
--secret-key, so they can open it), usage counting both turns, and the next turn starting
from the item.
Token counts come from POST /v1/responses/input_tokens, the model's own tokenizer and
template: the run's usage must be exactly what the contexts it read cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import (
    EasyInputMessageParam,
    ResponseCompactionCompactingEvent,
    ResponseCompactionItem,
    ResponseCompletedEvent,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
)

from respond.responses.compacting import SUMMARY_REQUEST
from respond.responses.sealing import Sealer, load_key
from tests.support.clients import openai_client
from tests.support.server import Server, start_server
from tests.support.ws import socket, turn

MODEL = "smollm2-135m"
SECRET = "compaction-tests"
SEALER = Sealer(load_key(SECRET, Path("unused")))
THRESHOLD = 100
COMPACT: Any = [{"type": "compaction", "compact_threshold": THRESHOLD}]


def user(text: str) -> EasyInputMessageParam:
    return {"type": "message", "role": "user", "content": text}


NOTES = (
    "My notes for the trip: I fly to Lisbon on Monday and stay three nights near the river. "
    "On Thursday I take the train to Porto, where my sister lives, and we visit the old "
    "bookshop and the bridge. On Sunday I fly home from Porto. I must remember to pack a "
    "rain jacket, my passport, the charger for my phone and a present for my sister."
)
HISTORY: list[Any] = [
    user(NOTES),
    {"type": "message", "role": "assistant", "content": "Thank you, I have read your notes."},
    user("Which city do I visit first?"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("compaction"))
    srv = start_server(tmp, "--threads", "2", "--secret-key", SECRET)
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
    return client.responses.create(**kw)


def tokens(client: openai.OpenAI, **kw: Any) -> int:
    return int(client.responses.input_tokens.count(model=MODEL, **kw).input_tokens)


def as_input(items: list[Any]) -> list[dict[str, Any]]:
    """Output items (SDK objects) as the input items a client sends back."""
    out = []
    for item in items:
        data = item.model_dump(mode="json", exclude_none=True)
        if data["type"] == "message":
            data["content"] = [{"type": p["type"], "text": p["text"]} for p in data["content"]]
        out.append(data)
    return out


def carried(item: ResponseCompactionItem) -> list[tuple[str, str]]:
    """What a compaction item carries: the (role, text) of its messages."""
    items = SEALER.unseal_items(item.encrypted_content, None)
    return [(i["role"], "".join(part["text"] for part in i["content"])) for i in items]


def check_compacted(client: openai.OpenAI, response: Any) -> ResponseCompactionItem:
    """`response` compacted HISTORY, and its usage is what its two turns read."""
    assert response.status in ("completed", "incomplete")  # the answer may use its 8 tokens
    compaction, answer = response.output
    assert isinstance(compaction, ResponseCompactionItem)
    assert isinstance(answer, ResponseOutputMessage)
    assert compaction.id.startswith("cmp_")
    request, (role, summary), last = carried(compaction)
    assert request == ("user", SUMMARY_REQUEST)
    assert role == "assistant" and summary
    assert last == ("user", "Which city do I visit first?")
    summary_turn = tokens(client, input=[*HISTORY[:-1], user(SUMMARY_REQUEST)])
    answer_turn = tokens(client, input=[compaction.model_dump(exclude_none=True)])
    assert answer_turn < tokens(client, input=HISTORY)  # the context became shorter
    assert response.usage.input_tokens == summary_turn + answer_turn
    assert response.usage.output_tokens > 8  # the answer has at most 8: the summary's too
    return compaction


def test_the_preconditions_hold(client: openai.OpenAI) -> None:
    assert tokens(client, input=HISTORY) > THRESHOLD


def test_a_compacted_response_and_the_next_turn_by_previous_response_id(
    client: openai.OpenAI,
) -> None:
    first = create(client, input=HISTORY, context_management=COMPACT)
    compaction = check_compacted(client, first)
    stored = client.responses.retrieve(first.id)
    assert stored.output[0] == compaction
    assert len(list(client.responses.input_items.list(first.id))) == len(HISTORY)

    # The next turn reads the compaction item on, not the history it stands for.
    after = [*as_input(first.output), user("And then?")]
    chained = tokens(client, previous_response_id=first.id, input="And then?")
    assert chained == tokens(client, input=after)
    assert chained < tokens(
        client, input=[*HISTORY, *as_input(first.output[1:]), user("And then?")]
    )
    second = create(client, previous_response_id=first.id, input="And then?")
    assert second.usage.input_tokens == chained


def test_a_streamed_compaction_parses_into_the_sdks_types(client: openai.OpenAI) -> None:
    events = list(create(client, input=HISTORY, context_management=COMPACT, stream=True))
    added = events[2]
    assert isinstance(added, ResponseOutputItemAddedEvent)
    assert isinstance(added.item, ResponseCompactionItem) and added.output_index == 0
    progress = [e for e in events if isinstance(e, ResponseCompactionCompactingEvent)]
    assert progress and all(e.item_id == added.item.id for e in progress)
    done = next(e for e in events if isinstance(e, ResponseOutputItemDoneEvent))
    assert isinstance(done.item, ResponseCompactionItem) and done.item.id == added.item.id
    assert carried(added.item)[0] == ("user", HISTORY[0]["content"])  # whole until done
    final = events[-1]
    assert isinstance(final, ResponseCompletedEvent | ResponseIncompleteEvent)
    assert final.response.output[0] == done.item
    check_compacted(client, final.response)


def test_resending_the_output_without_a_store_reads_from_the_compaction(
    client: openai.OpenAI,
) -> None:
    first = create(client, input=HISTORY, context_management=COMPACT, store=False)
    check_compacted(client, first)
    resent = [*HISTORY, *as_input(first.output), user("And then?")]
    second = create(client, input=resent, store=False)
    assert second.usage.input_tokens == tokens(
        client, input=[*as_input(first.output), user("And then?")]
    )


def test_a_websocket_chain_without_a_store_reads_from_the_compaction(
    client: openai.OpenAI, server: Server
) -> None:
    body = {"model": MODEL, "max_output_tokens": 8, "temperature": 0, "store": False}
    with socket(server) as conn:
        first = turn(conn, {**body, "input": HISTORY, "context_management": COMPACT})[-1]
        assert first["type"] in ("response.completed", "response.incomplete"), first
        output = first["response"]["output"]
        assert [item["type"] for item in output] == ["compaction", "message"]
        second = turn(
            conn, {**body, "input": "And then?", "previous_response_id": first["response"]["id"]}
        )[-1]
    assert second["type"] in ("response.completed", "response.incomplete"), second
    answer = {"role": "assistant", "content": output[1]["content"][0]["text"]}
    assert second["response"]["usage"]["input_tokens"] == tokens(
        client, input=[output[0], answer, user("And then?")]
    )
