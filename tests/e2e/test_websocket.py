"""WebSocket mode of /v1/responses with a plain WebSocket client against the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from tests.e2e.test_engine_behaviour import STORY, wait_for_generation_end
from tests.support.schema import validate_response
from tests.support.server import Server, start_server
from tests.support.sse import read_events
from tests.support.ws import TERMINAL, error_of, receive, send, socket, turn

SHORT: dict[str, Any] = {"max_output_tokens": 8, "temperature": 0}


def test_events_are_the_sse_events(server: Server) -> None:
    body = {"input": "Say hello.", **SHORT}
    with socket(server) as conn:
        events = turn(conn, body)
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=120
    ) as reply:
        sse = list(read_events(reply))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert sum(e["type"] in TERMINAL for e in events) == 1
    # Same model, same prompt, temperature 0: the same event sequence as over SSE.
    assert [e["type"] for e in events] == [e["type"] for e in sse]
    final = events[-1]["response"]
    validate_response(final)
    assert final["status"] in ("completed", "incomplete")
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert final["output"][0]["content"][0]["text"] == deltas


def test_store_false_chains_on_the_same_connection(server: Server) -> None:
    question = "And what comes after that?"
    with socket(server) as conn:
        first = turn(conn, {"input": "Count: one, two, three.", "store": False, **SHORT})
        first_id = first[-1]["response"]["id"]
        second = turn(
            conn,
            {"input": question, "previous_response_id": first_id, "store": False, **SHORT},
        )
        alone = turn(conn, {"input": question, "store": False, **SHORT})
    chained = second[-1]["response"]
    assert chained["previous_response_id"] == first_id
    assert chained["status"] in ("completed", "incomplete")
    # The remembered context (first input and output) is in the prompt of the second turn.
    assert chained["usage"]["input_tokens"] > alone[-1]["response"]["usage"]["input_tokens"]


def test_warm_up_without_generating_then_chain(server: Server) -> None:
    with socket(server) as conn:
        warm = turn(conn, {"input": "You answer briefly.", "generate": False, "store": False})
        assert [e["type"] for e in warm] == [
            "response.created",
            "response.in_progress",
            "response.completed",
        ]
        assert warm[-1]["response"]["output"] == []
        follow = turn(
            conn,
            {
                "input": "Hi",
                "previous_response_id": warm[-1]["response"]["id"],
                "store": False,
                **SHORT,
            },
        )
    assert follow[-1]["type"] in ("response.completed", "response.incomplete")


def test_failed_turn_forgets_store_false_context(server: Server) -> None:
    with socket(server) as conn:
        first = turn(conn, {"input": "Hi", "store": False, **SHORT})
        first_id = first[-1]["response"]["id"]
        failed = turn(conn, {"input": "Hi", "model": "no-such-model", **SHORT})
        assert error_of(failed)["status"] == 404
        again = turn(conn, {"input": "Go on", "previous_response_id": first_id, **SHORT})
    error = error_of(again)
    assert error["status"] == 404
    assert error["error"]["code"] == "previous_response_not_found"
    assert error["error"]["param"] == "previous_response_id"


def test_reconnect_cannot_continue_store_false(server: Server) -> None:
    with socket(server) as conn:
        first_id = turn(conn, {"input": "Hi", "store": False, **SHORT})[-1]["response"]["id"]
    with socket(server) as conn:
        again = turn(conn, {"input": "Go on", "previous_response_id": first_id, **SHORT})
    assert error_of(again)["error"]["code"] == "previous_response_not_found"


@pytest.mark.parametrize(
    ("frame", "status", "param"),
    [
        ("not json", 400, None),
        ("[1, 2]", 400, None),
        (json.dumps({"input": "no type"}), 400, "type"),
        (json.dumps({"type": "response.cancel"}), 400, "type"),
        (
            json.dumps({"type": "response.create", "input": "x", "background": True}),
            400,
            "background",
        ),
        (
            json.dumps({"type": "response.create", "input": "x", "temperature": 9}),
            400,
            "temperature",
        ),
        (json.dumps({"type": "response.create", "input": [{"type": "nope"}]}), 400, None),
        (json.dumps({"type": "response.create", "input": "x", "model": "nope"}), 404, "model"),
    ],
)
def test_malformed_frames_get_an_error_event_and_the_socket_lives(
    server: Server, frame: str, status: int, param: str | None
) -> None:
    with socket(server) as conn:
        send(conn, frame)
        error = receive(conn)
        assert error["type"] == "error"
        assert error["status"] == status
        assert error["error"]["code"]
        if param is not None:
            assert error["error"]["param"] == param
        # Still usable: a good frame (with HTTP's stream field, which is dropped) completes.
        events = turn(conn, {"input": "Hi", "stream": True, **SHORT})
    assert events[-1]["type"] in ("response.completed", "response.incomplete")


def test_binary_frame_is_read_as_json(server: Server) -> None:
    with socket(server) as conn:
        conn.send(json.dumps({"type": "response.create", "input": "Hi", **SHORT}).encode())
        events = [receive(conn)]
        while events[-1]["type"] not in TERMINAL:
            events.append(receive(conn))
    assert events[0]["type"] == "response.created"


def test_one_response_in_flight_per_socket(server: Server) -> None:
    body = {"type": "response.create", "input": "Tell me a story.", "max_output_tokens": 32}
    with socket(server) as conn:
        send(conn, body)
        send(conn, body)
        events = [receive(conn)]
        while events[-1]["type"] not in TERMINAL:
            events.append(receive(conn))
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["status"] == 409
    created = [e for e in events if e["type"] == "response.created"]
    assert len(created) == 1, "the second create was refused, not run"


def test_closing_the_socket_stops_generation(server: Server) -> None:
    since = len(server.log())
    with socket(server) as conn:
        send(conn, {"type": "response.create", "input": STORY, "max_output_tokens": 3000})
        deltas = 0
        while deltas < 3:
            deltas += receive(conn)["type"] == "response.output_text.delta"
    how, count = wait_for_generation_end(server, since)
    assert how == "cancelled"
    assert count < 40


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("ws-keyed")), "--threads", "1", "--api-key", "sekret"
    )
    yield srv
    srv.stop()


def test_handshake_needs_the_api_key(keyed_server: Server) -> None:
    with pytest.raises(InvalidStatus) as refused, socket(keyed_server):
        pass
    assert refused.value.response.status_code == 401
    assert b"invalid_api_key" in refused.value.response.body
    with socket(keyed_server, {"Authorization": "Bearer sekret"}) as conn:
        events = turn(conn, {"input": "Hi", **SHORT})
    assert events[-1]["type"] in ("response.completed", "response.incomplete")
