"""State in front of upstreams: chains, conversations, background runs, cancel, input tokens.

respond keeps the state; the upstream (the scripted FAKE, whose `echo` script answers with
the request it received) sees the fully expanded context on every turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.polling import has_text, stored_events, wait_for
from tests.support.schema import validate_response
from tests.support.server import Server, start_server
from tests.support.upstreams import start_fake, write_config


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_fake(Path(tmp_path_factory.mktemp("fake")), "s")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def front(fake: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("front"))
    config = write_config(
        tmp,
        f'[models.chat]\nupstream = "{fake.base_url}"\nmodel = "echo"\n'
        f'[models.slow]\nupstream = "{fake.base_url}"\nmodel = "slow"\n'
        f'[models.resp]\nupstream = "{fake.base_url}"\nmodel = "echo"\napi = "responses"\n',
    )
    srv = start_server(tmp, "--config", str(config))
    yield srv
    srv.stop()


def create(front: Server, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(f"{front.base_url}/responses", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    validate_response(data)
    return data


def sent(response: dict[str, Any]) -> dict[str, Any]:
    """The request the upstream received, as its echo answer reports it."""
    message = next(item for item in response["output"] if item["type"] == "message")
    data: dict[str, Any] = json.loads(message["content"][0]["text"])["request"]
    return data


def test_chain_is_expanded_for_a_chat_upstream(front: Server) -> None:
    first = create(front, {"model": "chat", "instructions": "Be brief.", "input": "one"})
    second = create(front, {"model": "chat", "input": "two", "previous_response_id": first["id"]})
    answer = first["output"][0]["content"][0]["text"]
    # Instructions are not inherited; the stored turn is.
    assert sent(second)["messages"] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "two"},
    ]
    stored = httpx.get(f"{front.base_url}/responses/{second['id']}").json()
    assert stored == second


def test_chain_is_expanded_for_a_stateless_responses_upstream(front: Server) -> None:
    first = create(front, {"model": "resp", "input": "one"})
    second = create(front, {"model": "resp", "input": "two", "previous_response_id": first["id"]})
    request = sent(second)
    assert request["store"] is False
    assert [(i["role"], i["content"][0]["type"]) for i in request["input"]] == [
        ("user", "input_text"),
        ("assistant", "output_text"),
        ("user", "input_text"),
    ]
    assert request["input"][2]["content"][0]["text"] == "two"


def test_conversation_turns_reach_the_upstream(front: Server) -> None:
    conversation = httpx.post(f"{front.base_url}/conversations", json={}).json()["id"]
    create(front, {"model": "chat", "input": "alpha", "conversation": conversation})
    second = create(front, {"model": "chat", "input": "beta", "conversation": conversation})
    contents = [m["content"] for m in sent(second)["messages"] if m["role"] == "user"]
    assert contents == ["alpha", "beta"]


def test_background_run_on_an_upstream(front: Server) -> None:
    made = create(front, {"model": "chat", "input": "later", "background": True})
    assert made["status"] == "queued"
    final = wait_for(
        front.base_url, made["id"], lambda b: b["status"] not in ("queued", "in_progress")
    )
    assert final["status"] == "completed"
    assert sent(final)["messages"] == [{"role": "user", "content": "later"}]
    assert stored_events(front.base_url, made["id"])[-1]["response"] == final


def test_cancel_aborts_the_upstream_request(front: Server, fake: Server) -> None:
    before = httpx.get(f"{fake.url}/stats").json()["aborted"]
    made = create(front, {"model": "slow", "input": "go", "background": True})
    wait_for(front.base_url, made["id"], has_text, timeout=30)
    cancelled = httpx.post(f"{front.base_url}/responses/{made['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    deadline = time.monotonic() + 10
    while httpx.get(f"{fake.url}/stats").json()["aborted"] == before:
        assert time.monotonic() < deadline, "the upstream kept generating after cancel"
        time.sleep(0.1)


def test_input_tokens_are_counted_by_the_upstream(front: Server) -> None:
    for model, expected in (("chat", 11), ("resp", 42)):
        reply = httpx.post(
            f"{front.base_url}/responses/input_tokens", json={"model": model, "input": "count"}
        )
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"object": "response.input_tokens", "input_tokens": expected}
