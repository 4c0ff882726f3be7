"""Background runs, cancel, stream resume and the queue through the official SDK (SQLite
store)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import openai
import pytest

from tests.support.clients import openai_client
from tests.support.polling import folded, has_text, stored_events, wait_for
from tests.support.queue import assert_ran_once, watch
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server

MODEL = "smollm2-135m"
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
ACTIVE = ("queued", "in_progress")


class _Long(TypedDict):
    input: str
    max_output_tokens: int


LONG: _Long = {"input": "Write a very long story about a dragon.", "max_output_tokens": 2000}


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that runs at most two background runs at once."""
    srv = start_server(
        Path(tmp_path_factory.mktemp("capped")), "--threads", "2", "--background-max", "2"
    )
    yield srv
    srv.stop()


def dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", exclude_unset=True)
    return data


def check_lifecycle(events: list[dict[str, Any]]) -> None:
    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert types[-1] in TERMINAL and sum(t in TERMINAL for t in types) == 1


def test_background_is_queued_then_runs_to_the_end(client: openai.OpenAI, server: Server) -> None:
    made = client.responses.create(
        model=MODEL, input="Say hi.", max_output_tokens=12, background=True
    )
    validate_response(dump(made))
    assert made.status == "queued" and made.background is True
    final = wait_for(
        server.base_url, made.id, lambda b: b["status"] not in ("queued", "in_progress")
    )
    validate_response(final)
    assert final["status"] in ("completed", "incomplete") and final["output"]
    events = stored_events(server.base_url, made.id)
    check_lifecycle(events)
    assert events[-1]["response"] == final
    assert (
        client.responses.retrieve(made.id).output_text == final["output"][0]["content"][0]["text"]
    )


def test_background_stream_and_resume(client: openai.OpenAI, server: Server) -> None:
    streamed = [
        dump(e)
        for e in client.responses.create(
            model=MODEL, input="Count to five.", max_output_tokens=12, background=True, stream=True
        )
    ]
    check_lifecycle(streamed)
    response_id = streamed[0]["response"]["id"]
    resumed = [
        dump(e) for e in client.responses.retrieve(response_id, stream=True, starting_after=4)
    ]
    assert resumed == streamed[5:]


def test_resume_follows_a_running_response_live(client: openai.OpenAI, server: Server) -> None:
    made = client.responses.create(model=MODEL, background=True, **LONG | {"max_output_tokens": 64})
    live = [dump(e) for e in client.responses.retrieve(made.id, stream=True, starting_after=0)]
    assert live[0]["sequence_number"] == 1 and live[-1]["type"] in TERMINAL
    for event in live:
        validate_event(event)
    # What was followed live is exactly what the store keeps.
    assert live == stored_events(server.base_url, made.id, after=0)


def test_cancel_stops_generation(client: openai.OpenAI, server: Server) -> None:
    made = client.responses.create(model=MODEL, background=True, **LONG)
    wait_for(server.base_url, made.id, has_text)
    cancelled = client.responses.cancel(made.id)
    validate_response(dump(cancelled))
    assert cancelled.status == "cancelled"
    events = stored_events(server.base_url, made.id)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["status"] == "cancelled"
    assert events[-1]["response"]["output"][0]["status"] == "incomplete"
    assert folded(events) == httpx.get(f"{server.base_url}/responses/{made.id}").json()
    time.sleep(1)
    assert stored_events(server.base_url, made.id) == events  # nothing more was generated
    # Cancelling again changes nothing.
    assert client.responses.cancel(made.id).status == "cancelled"


def test_cancel_a_queued_run(capped: Server) -> None:
    with openai_client(capped.base_url) as client:
        running = [client.responses.create(model=MODEL, background=True, **LONG) for _ in "ab"]
        waiting = client.responses.create(model=MODEL, background=True, **LONG)
        # Two background runs at a time: the third waits its turn, queued.
        assert client.responses.retrieve(waiting.id).status == "queued"
        assert client.responses.cancel(waiting.id).status == "cancelled"
        types = [e["type"] for e in stored_events(capped.base_url, waiting.id)]
        assert types == ["response.created", "response.queued", "response.failed"]
        for run in running:
            assert client.responses.cancel(run.id).status == "cancelled"


def test_more_runs_than_background_max_wait_queued(capped: Server) -> None:
    with openai_client(capped.base_url) as client:
        made = [
            client.responses.create(
                model=MODEL, background=True, input=f"Count to {n}.", max_output_tokens=32
            )
            for n in range(5)
        ]
    assert all(m.status == "queued" for m in made)
    ids = [m.id for m in made]
    seen = watch(capped.base_url, ids)
    assert seen.most_at_once == 2 and seen.waited, seen
    for response_id in ids:
        assert seen.final[response_id]["status"] in ("completed", "incomplete")
        events = stored_events(capped.base_url, response_id)
        check_lifecycle(events)
        assert_ran_once(events)
        assert events[-1]["response"] == seen.final[response_id]


def test_queued_runs_outlive_a_killed_server(tmp_path: Path) -> None:
    """Runs accepted by a server that never starts them (--background-max 0) wait in the
    store; after a SIGKILL, the next server on that data directory runs them."""
    accepting = start_server(tmp_path, "--threads", "2", "--background-max", "0")
    try:
        with openai_client(accepting.base_url) as client:
            made = [
                client.responses.create(
                    model=MODEL, background=True, input="Say hi.", max_output_tokens=12
                )
                for _ in range(3)
            ]
            time.sleep(3)  # more than a heartbeat: nothing starts them
            assert all(client.responses.retrieve(m.id).status == "queued" for m in made)
    finally:
        accepting.process.send_signal(signal.SIGKILL)
        accepting.process.wait()
    survivor = start_server(tmp_path, "--threads", "2")  # the same --data-dir
    try:
        for m in made:
            final = wait_for(survivor.base_url, m.id, lambda b: b["status"] not in ACTIVE, 180)
            assert final["status"] in ("completed", "incomplete"), final
            events = stored_events(survivor.base_url, m.id)
            check_lifecycle(events)
            assert_ran_once(events)
            assert f"starting queued response {m.id}" in survivor.log()
    finally:
        survivor.stop()


def test_cancel_errors(client: openai.OpenAI, server: Server) -> None:
    foreground = client.responses.create(model=MODEL, input="Hi", max_output_tokens=4)
    with pytest.raises(openai.BadRequestError) as sync:
        client.responses.cancel(foreground.id)
    assert "synchronous" in sync.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_unknown")
    done = client.responses.create(model=MODEL, input="Hi", max_output_tokens=4, background=True)
    final = wait_for(
        server.base_url, done.id, lambda b: b["status"] not in ("queued", "in_progress")
    )
    assert client.responses.cancel(done.id).status == final["status"]


def test_background_needs_store(server: Server) -> None:
    reply = httpx.post(
        f"{server.base_url}/responses",
        json={"input": "x", "background": True, "store": False},
    )
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "store"


def test_sdk_stream_helper_resumes_by_response_id(client: openai.OpenAI) -> None:
    made = client.responses.create(
        model=MODEL, input="Say hi.", max_output_tokens=64, temperature=0, background=True
    )
    with client.responses.stream(response_id=made.id, starting_after=3) as stream:
        events = list(stream)
        assert events[0].sequence_number == 4
        if events[-1].type == "response.completed":
            final = stream.get_final_response()
            assert final.id == made.id and final.output_text
    texts = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert client.responses.retrieve(made.id).output_text.endswith(texts)
