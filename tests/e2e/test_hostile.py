"""Hostile requests against the real server: none may crash, freeze or out-race it.

- the committed corpus (tests/e2e/data/hostile_corpus.json): every body that once took
  the server down (SIGSEGV in llama.cpp's grammar parser), grew it to gigabytes, or got
  a 500, each answered its 400 with the error envelope while the process stays up;
- bounds within the limits still get a correct, bounded answer;
- /health answers within a second while a large prompt is counted or truncated;
- a stored response is durable before its terminal event (SSE, JSON, WebSocket, and on
  PostgreSQL), and chaining on one still in progress is a 400 that says so.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ws
from tests.support.server import Server, start_server
from tests.support.sse import read_events
from tests.support.stores import served_on

CORPUS = json.loads((Path(__file__).parent / "data" / "hostile_corpus.json").read_text())["cases"]
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _body(case: dict[str, Any]) -> bytes | None:
    if "raw" in case:
        raw: str = case["raw"]
        return raw.encode()
    if "raw_hex" in case:
        return bytes.fromhex(case["raw_hex"])
    if "body" not in case:
        return None
    body = dict(case["body"])
    if "expand" in case:
        spec = case["expand"]
        body[spec["field"]] = [spec["item"]] * spec["count"]
    # ensure_ascii: a lone surrogate travels as its JSON escape, as a client would send it.
    return json.dumps(body, ensure_ascii=True).encode()


def assert_alive(server: Server) -> None:
    assert server.process.poll() is None, f"the server died:\n{server.log()[-3000:]}"
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200


@pytest.mark.parametrize("case", CORPUS, ids=[case["name"] for case in CORPUS])
def test_hostile_corpus(server: Server, case: dict[str, Any]) -> None:
    reply = httpx.request(
        case["method"],
        f"{server.url}{case['path']}",
        content=_body(case),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert reply.status_code == case["status"], reply.text[:500]
    error = reply.json()["error"]
    assert error["message"] and error["type"] and error["code"], error
    if case["code"] is not None:
        assert error["code"] == case["code"], error
    if case["param"] is not None:
        assert error["param"] == case["param"], error
    assert_alive(server)


def test_hostile_frames_over_websocket(server: Server) -> None:
    """The same checks on WebSocket frames: an error event, and the socket serves on."""
    with ws.socket(server) as conn:
        for raw in (
            '{"type": "response.create", "input": "\\ud800"}',
            '{"type": "response.create", "input": "a\\u0000"}',
            '{"type": "response.create", "input": ' + "[" * 1000 + "]" * 1000 + "}",
        ):
            ws.send(conn, raw)
            event = ws.receive(conn)
            assert event["type"] == "error" and event["status"] == 400, event
            assert event["error"]["code"] in ("invalid_value", "invalid_json"), event
        events = ws.turn(conn, {"input": "Say hi.", "max_output_tokens": 4})
        assert events[-1]["type"] in TERMINAL
    assert_alive(server)


# ---------------------------------------------------------------- within the limits


def _schema_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": "Write a word.",
        "max_output_tokens": 8,
        "text": {"format": {"type": "json_schema", "name": "out", "schema": schema}},
    }


def test_bounds_at_the_limit_are_answered(server: Server) -> None:
    """A bound of exactly the limit builds, parses and generates (cut by the token limit)."""
    for schema in (
        {"type": "string", "maxLength": 1000},
        {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "maxItems": 1000}},
            "required": ["xs"],
        },
        {"type": "string", "pattern": "^x{0,1000}$"},
    ):
        reply = httpx.post(f"{server.base_url}/responses", json=_schema_body(schema), timeout=600)
        assert reply.status_code == 200, reply.text[:500]
        assert reply.json()["status"] in ("completed", "incomplete")
    assert_alive(server)


def test_a_custom_tool_regex_at_the_limit_is_answered(server: Server) -> None:
    body = {
        "input": "Call the tool.",
        "max_output_tokens": 8,
        "tools": [
            {
                "type": "custom",
                "name": "c",
                "format": {"type": "grammar", "syntax": "regex", "definition": "x{0,1000}"},
            }
        ],
        "tool_choice": {"type": "custom", "name": "c"},
    }
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=600)
    assert reply.status_code == 200, reply.text[:500]
    assert_alive(server)


# ---------------------------------------------------------------- no freezing


def _health_while(server: Server, request: dict[str, Any], path: str) -> tuple[int, float]:
    """(status of `request`, slowest /health answer while it ran)."""
    outcome: list[int | BaseException] = []

    def send() -> None:
        try:
            reply = httpx.post(f"{server.base_url}/{path}", json=request, timeout=600)
            assert reply.status_code == 200, reply.text[:500]
            outcome.append(reply.status_code)
        except (httpx.HTTPError, AssertionError) as exc:
            outcome.append(exc)

    worker = threading.Thread(target=send)
    worker.start()
    slowest = 0.0
    with httpx.Client(timeout=10) as poller:
        while worker.is_alive():
            started = time.monotonic()
            assert poller.get(f"{server.url}/health").status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.05)
    worker.join()
    assert isinstance(outcome[0], int), f"the request failed: {outcome[0]!r}"
    return outcome[0], slowest


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A 1024-token context: truncation then keeps a short prompt, so the test measures
    the truncation, not a long prefill."""
    server = start_server(Path(tmp_path_factory.mktemp("small")), "--threads", "1", "-c", "1024")
    yield server
    server.stop()


# Milliseconds on an idle machine; generous for a loaded one. Tokenizing on the event loop
# froze /health for 40 s (10,000 messages) and 122 s (truncating 1,400).
HEALTH_SECONDS = 5.0


def _messages(count: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"word{i}"} for i in range(count)]


def test_health_answers_while_a_large_prompt_is_counted(server: Server) -> None:
    """10,000 one-word messages (the most input items allowed) froze everything before."""
    status, slowest = _health_while(server, {"input": _messages(10_000)}, "responses/input_tokens")
    assert status == 200
    assert slowest < HEALTH_SECONDS, f"/health took {slowest:.2f}s while tokenizing"


def test_truncation_auto_of_a_long_history_does_not_freeze(small: Server) -> None:
    """1,400 messages with truncation "auto" (42 KB) froze the server for two minutes."""
    request = {"input": _messages(1400), "truncation": "auto", "max_output_tokens": 2}
    status, slowest = _health_while(small, request, "responses")
    assert status == 200
    assert slowest < HEALTH_SECONDS, f"/health took {slowest:.2f}s while truncating"


# Documented in docs/api.md (Limits): what the worst allowed request may make the process.
MEMORY_CEILING_MB = 1500


def _peak_rss_mb(server: Server) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")


def test_the_worst_allowed_request_stays_under_the_memory_ceiling(small: Server) -> None:
    """The most input items allowed, and tools with schemas at the bounds up to the grammar
    limit: the process stays under MEMORY_CEILING_MB and /health answers meanwhile."""
    server = small
    string = {"type": "string", "maxLength": 1000, "pattern": "^[a-z]{0,1000}$"}
    array = {"type": "array", "items": {"type": "integer"}, "maxItems": 1000}
    parameters = {
        "type": "object",
        "properties": {"s": string, "xs": array},
        "required": ["s", "xs"],
    }
    # Seven tools at the bounds make a grammar just under its 256 KiB limit (more tools
    # would not leave the prompt room in the context window).
    tools = [{"type": "function", "name": f"f{i}", "parameters": parameters} for i in range(7)]
    request = {
        "input": _messages(10_000),
        "tools": tools,
        "tool_choice": "required",
        "truncation": "auto",
        "max_output_tokens": 2,
    }
    status, slowest = _health_while(server, request, "responses")
    assert status == 200
    assert slowest < HEALTH_SECONDS, f"/health took {slowest:.2f}s"
    assert _peak_rss_mb(server) < MEMORY_CEILING_MB
    assert_alive(server)


# ---------------------------------------------------------------- stored before done


def _stream_until_terminal(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=600
    ) as reply:
        for event in read_events(reply):
            if event["type"] in TERMINAL:
                # Act on it at once, as an agent does, before the stream has even closed.
                return dict(event["response"])
    raise AssertionError("no terminal event")


def _stored_at_once(server: Server) -> None:
    for _ in range(5):
        response = _stream_until_terminal(server, {"input": "Say hi.", "max_output_tokens": 3})
        got = httpx.get(f"{server.base_url}/responses/{response['id']}", timeout=30)
        assert got.status_code == 200, got.text
        assert got.json()["status"] == response["status"]
        again = {"input": "Again.", "previous_response_id": response["id"], "max_output_tokens": 2}
        chained = httpx.post(f"{server.base_url}/responses", json=again, timeout=600)
        assert chained.status_code == 200, chained.text


def test_stored_before_the_terminal_event(server: Server) -> None:
    _stored_at_once(server)


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with served_on("postgres", Path(tmp_path_factory.mktemp("pg")), "--threads", "1") as server:
        yield server


@pytest.mark.pg
def test_stored_before_the_terminal_event_on_postgres(pg_server: Server) -> None:
    _stored_at_once(pg_server)


@pytest.mark.pg
def test_nul_in_an_id_on_postgres(pg_server: Server) -> None:
    for method, path in (("GET", "responses/resp_%00"), ("DELETE", "conversations/conv_%00")):
        reply = httpx.request(method, f"{pg_server.base_url}/{path}", timeout=30)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["code"] == "invalid_value"
    assert_alive(pg_server)


def test_next_websocket_turn_right_after_the_terminal_event(server: Server) -> None:
    """Each response.create is sent the moment the previous terminal event arrives."""
    with ws.socket(server) as conn:
        previous = None
        for _ in range(5):
            body: dict[str, Any] = {"input": "Say hi.", "max_output_tokens": 3, "store": True}
            if previous:
                body["previous_response_id"] = previous
            events = ws.turn(conn, body)
            assert events[-1]["type"] in TERMINAL, events[-1]
            previous = events[-1]["response"]["id"]
        got = httpx.get(f"{server.base_url}/responses/{previous}", timeout=30)
        assert got.status_code == 200


def test_chaining_on_a_response_in_progress_is_a_400(server: Server) -> None:
    body = {"input": "Write a long story about a dragon.", "max_output_tokens": 400, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=600) as reply:
        events = read_events(reply)
        created = next(events)
        assert created["type"] == "response.created"
        chained = httpx.post(
            f"{server.base_url}/responses",
            json={"input": "More.", "previous_response_id": created["response"]["id"]},
            timeout=60,
        )
    assert chained.status_code == 400, chained.text
    error = chained.json()["error"]
    assert error["code"] == "previous_response_in_progress"
    assert error["param"] == "previous_response_id"
    assert "in progress" in error["message"]
    assert_alive(server)
