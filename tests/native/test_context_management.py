"""`context_management` on POST /v1/responses: a bad entry is a 400 naming it, and a context
over `compact_threshold` is compacted inside the run (responses/compacting.py).

The engine is the FAKE ScriptedEngine: its turns are scripted (the first one of a compacted
run is the summary) and it counts one token per word, so the tests can say exactly which
context passes the threshold. They check the mechanics: the item and its events, what each
engine turn read, usage, and the next turn starting from the compaction item.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from respond import Services, assemble, create_app
from respond.engines._base import (
    ChatTurn,
    EngineError,
    Finish,
    ModelInfo,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.engines.llamacpp._template import ChatTemplate, message_dicts
from respond.protocol.requests import CreateResponseBody
from respond.responses.compacting import SUMMARY_REQUEST, SUMMARY_TOKENS
from respond.responses.history import History
from respond.responses.run import Responses
from respond.responses.sealing import Sealer
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.schema import validate_event, validate_response
from tests.support.sse import read_events
from tests.support.templates import template_paths

OLD_QUESTION = "alpha " * 40  # 40 tokens to the fake engine
OLD_ANSWER = "beta " * 40
LAST = "What now?"
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": OLD_QUESTION},
    {"role": "assistant", "content": OLD_ANSWER},
    {"role": "user", "content": LAST},
]
SUMMARY = "They said alpha and beta."
COMPACT = [{"type": "compaction", "compact_threshold": 50}]
SEALER = Sealer.ephemeral()


def summary_turn(output_tokens: int = 6) -> list[Any]:
    return [TextDelta("They said "), TextDelta("alpha and beta."), Usage(82, output_tokens)]


def answer_turn(text: str = "Done.") -> list[Any]:
    return [TextDelta(text), Usage(20, 2), Finish("stop")]


def chat(turn: ChatTurn) -> list[tuple[str, str]]:
    return [(message.role, message.content) for message in turn.messages]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=600)


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine()


@pytest.fixture
def url(engine: ScriptedEngine, store: SQLiteStore) -> Iterator[str]:
    services = Services(store=store, sealer=SEALER)
    with serving(create_app(assemble({engine.info.id: engine}, services=services))) as base:
        yield base


def post(url: str, **body: Any) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/responses", json={"model": "fake-scripted", **body}, timeout=30)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    validate_response(data)
    return data


def streamed(url: str, **body: Any) -> list[dict[str, Any]]:
    body = {"model": "fake-scripted", **body, "stream": True}
    with httpx.stream("POST", f"{url}/v1/responses", json=body, timeout=30) as reply:
        assert reply.status_code == 200
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    return events


def opened(item: dict[str, Any]) -> list[tuple[str, str]]:
    """What a compaction item carries, as (role, text) of its messages."""
    items = SEALER.unseal_items(item["encrypted_content"], None)
    return [(i["role"], "".join(part["text"] for part in i["content"])) for i in items]


# ---------------------------------------------------------------- the entry


@pytest.mark.parametrize(
    ("entry", "param"),
    [
        ({"type": "summarize", "compact_threshold": 100}, "context_management[0].type"),
        ({"type": "compaction", "compact_threshold": 0}, "context_management[0].compact_threshold"),
        (
            {"type": "compaction", "compact_threshold": -5},
            "context_management[0].compact_threshold",
        ),
        ({"compact_threshold": 100}, "context_management[0].type"),
    ],
    ids=["unknown-type", "zero", "negative", "no-type"],
)
def test_a_bad_context_management_entry_is_a_400_naming_it(
    entry: dict[str, Any], param: str
) -> None:
    engine = ScriptedEngine()
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        body = {"model": engine.info.id, "input": "hi", "context_management": [entry]}
        reply = httpx.post(f"{url}/v1/responses", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"
    assert engine.turns == []


def test_a_context_under_the_threshold_is_not_compacted(engine: ScriptedEngine, url: str) -> None:
    engine.enqueue(*answer_turn("hello"))
    body = post(
        url, input=HISTORY, context_management=[{"type": "compaction", "compact_threshold": 1000}]
    )
    assert [item["type"] for item in body["output"]] == ["message"]
    assert len(engine.turns) == 1
    assert chat(engine.turns[0]) == [
        ("user", OLD_QUESTION),
        ("assistant", OLD_ANSWER),
        ("user", LAST),
    ]


# ---------------------------------------------------------------- one compacted run


def test_the_older_part_is_summarized_and_the_answer_reads_the_summary(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    body = post(url, input=HISTORY, instructions="Be brief.", context_management=COMPACT)

    assert [item["type"] for item in body["output"]] == ["compaction", "message"]
    compaction = body["output"][0]
    assert set(compaction) == {"type", "id", "encrypted_content"}
    assert compaction["id"].startswith("cmp_")
    assert SUMMARY not in compaction["encrypted_content"]  # sealed, not readable
    assert opened(compaction) == [("user", SUMMARY_REQUEST), ("assistant", SUMMARY), ("user", LAST)]

    summary, answer = engine.turns
    # The summary turn: the context up to the last user message, then the request; no tools.
    assert chat(summary) == [
        ("system", "Be brief."),
        ("user", OLD_QUESTION),
        ("assistant", OLD_ANSWER),
        ("user", SUMMARY_REQUEST),
    ]
    assert summary.tool_choice.mode == "none"
    assert summary.max_output_tokens == 40  # half the older part's 80 tokens
    # The answer: the summary where the older part was, the last user message verbatim.
    assert chat(answer) == [
        ("system", "Be brief."),
        ("user", SUMMARY_REQUEST),
        ("assistant", SUMMARY),
        ("user", LAST),
    ]
    assert body["usage"]["input_tokens"] == 82 + 20  # both turns
    assert body["usage"]["output_tokens"] == 6 + 2
    assert body["output"][1]["content"][0]["text"] == "Done."


async def test_the_compacted_prompt_is_shorter_than_the_original() -> None:
    engine = ScriptedEngine([[*summary_turn(), Finish("stop")], answer_turn()])
    service = Responses({engine.info.id: engine})
    body = CreateResponseBody.model_validate(
        {"model": engine.info.id, "input": HISTORY, "context_management": COMPACT}
    )
    run = await service.prepare(body)
    before = await engine.count_tokens(run.turn)
    async for _ in service.events(run):
        pass
    after = await engine.count_tokens(engine.turns[1])
    assert after < before
    assert run.builder.response.status == "completed"


def test_the_stream_has_the_compaction_item_then_the_answer(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    events = streamed(url, input=HISTORY, context_management=COMPACT)
    kinds = [event["type"] for event in events]
    assert kinds[:7] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",  # one per piece of summary sampled
        "response.compaction.compacting",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert kinds[-1] == "response.completed"
    added, done = events[2]["item"], events[5]["item"]
    assert added["type"] == done["type"] == "compaction" and added["id"] == done["id"]
    assert events[3]["item_id"] == added["id"] and events[3]["output_index"] == 0
    # Added, it carries the context as it was; done, the compacted one.
    assert opened(added) == [("user", OLD_QUESTION), ("assistant", OLD_ANSWER), ("user", LAST)]
    assert opened(done)[1] == ("assistant", SUMMARY)
    assert events[-1]["response"]["output"][0] == done
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_the_summary_does_not_spend_the_answers_max_output_tokens(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(output_tokens=30), Finish("length"))
    engine.enqueue(*answer_turn())
    body = post(url, input=HISTORY, context_management=COMPACT, max_output_tokens=5)
    assert engine.turns[1].max_output_tokens == 5
    assert body["status"] == "completed"  # the summary's own cut does not end the response
    assert body["usage"]["output_tokens"] == 30 + 2


def test_a_long_older_part_gets_at_most_the_longest_summary(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    long = [{"role": "user", "content": "gamma " * 2000}, *HISTORY]
    post(url, input=long, context_management=COMPACT)
    assert engine.turns[0].max_output_tokens == SUMMARY_TOKENS


def test_a_call_the_summary_turn_makes_is_not_output(engine: ScriptedEngine, url: str) -> None:
    engine.enqueue(
        TextDelta(SUMMARY),
        ToolCallStart(call_id="c1", name="get_weather"),
        ToolCallArgumentsDelta("{}"),
        ToolCallEnd(),
        Usage(82, 8),
        Finish("stop"),
    )
    engine.enqueue(*answer_turn())
    body = post(url, input=HISTORY, context_management=COMPACT)
    assert [item["type"] for item in body["output"]] == ["compaction", "message"]
    assert opened(body["output"][0])[1] == ("assistant", SUMMARY)


# ---------------------------------------------------------------- when there is nothing to do


def test_nothing_is_compacted_without_an_older_part(engine: ScriptedEngine, url: str) -> None:
    engine.enqueue(*answer_turn())
    body = post(url, input="delta " * 200, context_management=COMPACT)
    assert [item["type"] for item in body["output"]] == ["message"]
    assert len(engine.turns) == 1


def test_nothing_is_compacted_when_the_older_part_is_too_short_to_shrink(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*answer_turn())
    short = [{"role": "user", "content": "hi"}, {"role": "user", "content": "epsilon " * 100}]
    body = post(url, input=short, context_management=COMPACT)
    assert [item["type"] for item in body["output"]] == ["message"]
    assert len(engine.turns) == 1


def test_an_empty_summary_leaves_the_context_whole(engine: ScriptedEngine, url: str) -> None:
    engine.enqueue(Usage(82, 1), Finish("stop"))
    engine.enqueue(*answer_turn())
    body = post(url, input=HISTORY, context_management=COMPACT)
    whole = [("user", OLD_QUESTION), ("assistant", OLD_ANSWER), ("user", LAST)]
    assert opened(body["output"][0]) == whole
    assert chat(engine.turns[1]) == whole


# ---------------------------------------------------------------- the window


def windowed(window: int) -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.info = ModelInfo(
        id=engine.info.id, owned_by="tests", context_window=window, backend="fake"
    )
    return engine


def test_without_a_threshold_three_quarters_of_the_window_is_the_threshold() -> None:
    engine = windowed(100)  # 82 tokens pass 75
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        body = post(url, input=HISTORY, context_management=[{"type": "compaction"}])
    assert [item["type"] for item in body["output"]] == ["compaction", "message"]


def test_a_context_over_the_window_is_compacted_instead_of_refused() -> None:
    engine = windowed(100)  # 102 tokens do not fit
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    longer = [
        *HISTORY[:2],
        {"role": "user", "content": "eta " * 10},
        {"role": "assistant", "content": "theta " * 10},
        HISTORY[2],
    ]
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        body = post(url, input=longer, context_management=COMPACT)
    assert [item["type"] for item in body["output"]] == ["compaction", "message"]
    # The summary turn keeps the newest older items that fit, from a user message on (the
    # oldest alone would leave it starting with the assistant's, which some templates refuse).
    assert chat(engine.turns[0]) == [
        ("user", "eta " * 10),
        ("assistant", "theta " * 10),
        ("user", SUMMARY_REQUEST),
    ]


def test_a_newest_part_over_the_window_is_still_a_400() -> None:
    engine = windowed(60)
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        body = {
            "model": engine.info.id,
            "input": [*HISTORY[:2], {"role": "user", "content": "zeta " * 70}],
            "context_management": COMPACT,
        }
        reply = httpx.post(f"{url}/v1/responses", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["code"] == "context_length_exceeded"
    assert engine.turns == []


# ---------------------------------------------------------------- the next turn


def test_the_next_turn_by_previous_response_id_starts_from_the_compaction(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    engine.enqueue(*answer_turn("Then this."))
    first = post(url, input=HISTORY, context_management=COMPACT)
    post(url, input="And then?", previous_response_id=first["id"])
    assert chat(engine.turns[2]) == [
        ("user", SUMMARY_REQUEST),
        ("assistant", SUMMARY),
        ("user", LAST),
        ("assistant", "Done."),
        ("user", "And then?"),
    ]
    counted = httpx.post(
        f"{url}/v1/responses/input_tokens",
        json={"model": "fake-scripted", "input": "And then?", "previous_response_id": first["id"]},
    )
    assert counted.json()["input_tokens"] == sum(
        len(content.split()) for _, content in chat(engine.turns[2])
    )


def test_resending_the_output_without_a_store_starts_from_the_compaction(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    engine.enqueue(*answer_turn("Then this."))
    first = post(url, input=HISTORY, context_management=COMPACT, store=False)
    resent = [*HISTORY, *first["output"], {"role": "user", "content": "And then?"}]
    post(url, input=resent, store=False, context_management=COMPACT)
    assert len(engine.turns) == 3  # under the threshold now: no second compaction
    assert chat(engine.turns[2]) == [
        ("user", SUMMARY_REQUEST),
        ("assistant", SUMMARY),
        ("user", LAST),
        ("assistant", "Done."),
        ("user", "And then?"),
    ]


def test_a_compaction_in_the_input_replaces_the_chain_before_it(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*answer_turn())
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    engine.enqueue(*answer_turn("Then this."))
    old = post(url, input="An old turn.")
    first = post(url, input=HISTORY, context_management=COMPACT, previous_response_id=old["id"])
    post(
        url,
        input=[first["output"][0], {"role": "user", "content": "So?"}],
        previous_response_id=old["id"],
    )
    assert chat(engine.turns[3])[0] == ("user", SUMMARY_REQUEST)
    assert ("user", "An old turn.") not in chat(engine.turns[3])


def test_the_chain_in_a_conversation_starts_from_the_compaction(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    engine.enqueue(*answer_turn("Then this."))
    conv = httpx.post(f"{url}/v1/conversations", json={"items": HISTORY[:2]}).json()
    post(url, input=LAST, conversation=conv["id"], context_management=COMPACT)
    post(url, input="And then?", conversation=conv["id"])
    assert chat(engine.turns[2])[:3] == [
        ("user", SUMMARY_REQUEST),
        ("assistant", SUMMARY),
        ("user", LAST),
    ]


# ---------------------------------------------------------------- a summary that never ends


def test_a_failed_summary_fails_the_run_and_leaves_the_context_whole(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(TextDelta("They "), EngineError("the model crashed"))
    engine.enqueue(*answer_turn("Then this."))
    events = streamed(url, input=HISTORY, context_management=COMPACT)
    first = events[-1]["response"]
    assert first["status"] == "failed" and first["error"]["message"] == "the model crashed"
    assert [e["type"] for e in events[2:5]] == [
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    (item,) = first["output"]
    assert opened(item) == [("user", OLD_QUESTION), ("assistant", OLD_ANSWER), ("user", LAST)]
    post(url, input="And then?", previous_response_id=first["id"])
    assert chat(engine.turns[1]) == [
        ("user", OLD_QUESTION),
        ("assistant", OLD_ANSWER),
        ("user", LAST),
        ("user", "And then?"),
    ]


async def test_a_consumer_leaving_during_the_summary_cancels_with_the_context_whole(
    tmp_path: Path,
) -> None:
    engine = ScriptedEngine([[*summary_turn(), Finish("stop")], answer_turn()], delay=0.01)
    store = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=600)
    await store.open()
    try:
        history = History(store, SEALER)
        service = Responses({engine.info.id: engine}, recorder=history, history=history)
        body = CreateResponseBody.model_validate(
            {"model": engine.info.id, "input": HISTORY, "context_management": COMPACT}
        )
        run = await service.prepare(body)
        events = service.events(run)
        async for event in events:
            if event.type == "response.compaction.compacting":
                break
        await events.aclose()
        assert len(engine.turns) == 1  # the answer never started
        stored = await store.get_response(None, run.resource.id)
        assert stored is not None and stored.response["status"] == "cancelled"
        (item,) = stored.output_items
        assert opened(item) == [("user", OLD_QUESTION), ("assistant", OLD_ANSWER), ("user", LAST)]
        kept = [e["type"] for e in await store.events_after(None, run.resource.id, -1) or []]
        # The item is done (as it was added), then the stream ends cancelled.
        assert kept[-2:] == ["response.output_item.done", "response.failed"]
    finally:
        await store.close()


# ---------------------------------------------------------------- background and WebSocket


def test_a_background_run_is_compacted(engine: ScriptedEngine, url: str) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    queued = post(url, input=HISTORY, context_management=COMPACT, background=True)
    deadline = time.monotonic() + 20
    while True:
        got = httpx.get(f"{url}/v1/responses/{queued['id']}").json()
        if got["status"] not in ("queued", "in_progress") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got["status"] == "completed", got
    assert [item["type"] for item in got["output"]] == ["compaction", "message"]
    assert opened(got["output"][0])[1] == ("assistant", SUMMARY)


def test_a_websocket_chain_without_a_store_starts_from_the_compaction(
    engine: ScriptedEngine, url: str
) -> None:
    engine.enqueue(*summary_turn(), Finish("stop"))
    engine.enqueue(*answer_turn())
    engine.enqueue(*answer_turn("Then this."))
    ws = url.replace("http://", "ws://") + "/v1/responses"
    with connect(ws, open_timeout=10) as conn:
        first = ws_turn(conn, input=HISTORY, store=False, context_management=COMPACT)
        assert [item["type"] for item in first["output"]] == ["compaction", "message"]
        ws_turn(conn, input="And then?", store=False, previous_response_id=first["id"])
    assert chat(engine.turns[2])[:3] == [
        ("user", SUMMARY_REQUEST),
        ("assistant", SUMMARY),
        ("user", LAST),
    ]


def ws_turn(conn: Any, **body: Any) -> dict[str, Any]:
    conn.send(json.dumps({"type": "response.create", "model": "fake-scripted", **body}))
    while True:
        event = json.loads(conn.recv(timeout=30))
        validate_event(event)
        if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
            response: dict[str, Any] = event["response"]
            return response


# ---------------------------------------------------------------- every model's template


@functools.cache
def compacted_turns() -> tuple[ChatTurn, ChatTurn]:
    """The summary turn and the answer's turn of one compaction, as an engine gets them."""
    engine = ScriptedEngine([[*summary_turn(), Finish("stop")], answer_turn()])
    with serving(create_app(assemble({engine.info.id: engine}))) as url:
        post(url, input=HISTORY, instructions="Be brief.", context_management=COMPACT)
    summary, answer = engine.turns
    return summary, answer


@pytest.mark.parametrize("path", template_paths(), ids=lambda p: p.stem)
def test_every_template_renders_both_turns_of_a_compaction(path: Path) -> None:
    template = ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")
    summary, answer = compacted_turns()
    assert SUMMARY_REQUEST in template.render(message_dicts(summary.messages))
    prompt = template.render(message_dicts(answer.messages))
    assert SUMMARY in prompt and LAST in prompt and OLD_ANSWER not in prompt
