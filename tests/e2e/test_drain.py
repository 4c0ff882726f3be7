"""SIGTERM drains: new requests are refused with 503, work in flight finishes, exit 0."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.support.polling import wait_for
from tests.support.server import Server, start_server
from tests.support.ws import socket

MODEL = "smollm2-135m"
STORY = {"model": MODEL, "input": "Write a long story about a dragon.", "temperature": 0}


def _stream_in_background(server: Server, into: list[dict[str, Any]]) -> threading.Thread:
    def read() -> None:
        body = {**STORY, "max_output_tokens": 96, "stream": True}
        with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    into.append(json.loads(line[len("data: ") :]))

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def _until(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_sigterm_refuses_new_work_and_lets_work_in_flight_finish(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "2", "--drain-timeout", "60")
    background = httpx.post(
        f"{server.base_url}/responses",
        json={**STORY, "max_output_tokens": 64, "background": True},
        timeout=30,
    ).json()
    streamed: list[dict[str, Any]] = []
    reader = _stream_in_background(server, streamed)
    _until(lambda: any(e["type"] == "response.output_text.delta" for e in streamed), "no delta")

    server.process.send_signal(signal.SIGTERM)
    _until(lambda: httpx.get(f"{server.url}/health").status_code == 503, "/health stayed 200", 5)
    health = httpx.get(f"{server.url}/health")
    assert health.json() == {"status": "draining"}
    refused = httpx.post(f"{server.base_url}/responses", json={**STORY, "max_output_tokens": 4})
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "server_shutting_down"

    reader.join(timeout=120)
    assert streamed[-1]["type"] in ("response.completed", "response.incomplete"), streamed[-1]
    assert server.process.wait(timeout=60) == 0, server.log()[-3000:]

    again = start_server(tmp_path, "--threads", "2")  # the same data directory
    try:
        final = wait_for(again.base_url, background["id"], lambda b: True)
        assert final["status"] in ("completed", "incomplete"), final
        assert final["output"]
    finally:
        again.stop()


def test_a_run_that_outlasts_the_drain_fails_saying_why(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "2", "--drain-timeout", "1")
    made = httpx.post(
        f"{server.base_url}/responses",
        json={**STORY, "max_output_tokens": 2000, "background": True},
        timeout=30,
    ).json()
    wait_for(server.base_url, made["id"], lambda b: bool(b["output"]))
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0, server.log()[-3000:]

    again = start_server(tmp_path, "--threads", "2")
    try:
        final = wait_for(again.base_url, made["id"], lambda b: True)
        assert final["status"] == "failed"
        assert final["error"]["code"] == "server_stopped"
        assert "--drain-timeout" in final["error"]["message"]
        assert final["output"][0]["content"][0]["text"]  # what was made is kept
    finally:
        again.stop()


def test_a_new_websocket_is_closed_saying_why_while_draining(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "2", "--drain-timeout", "60")
    streamed: list[dict[str, Any]] = []
    reader = _stream_in_background(server, streamed)  # in flight: the drain waits for it
    _until(lambda: any(e["type"] == "response.output_text.delta" for e in streamed), "no delta")

    server.process.send_signal(signal.SIGTERM)
    _until(lambda: httpx.get(f"{server.url}/health").status_code == 503, "/health stayed 200", 5)
    with socket(server) as conn, pytest.raises(ConnectionClosed) as closed:
        conn.recv(timeout=10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1012  # service restart
    assert "shutting down" in closed.value.rcvd.reason

    reader.join(timeout=120)
    assert streamed[-1]["type"] in ("response.completed", "response.incomplete"), streamed[-1]
    assert server.process.wait(timeout=60) == 0, server.log()[-3000:]
    assert "without completing handshake" not in server.log()
