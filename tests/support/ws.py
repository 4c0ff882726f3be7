"""A plain WebSocket client for respond's WebSocket mode (GET /v1/responses upgraded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.support.schema import validate, validate_event
from tests.support.server import Server

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def ws_url(server: Server) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/responses"


@contextmanager
def socket(server: Server, headers: dict[str, str] | None = None) -> Iterator[ClientConnection]:
    conn = connect(ws_url(server), additional_headers=headers, open_timeout=10)
    with conn:
        yield conn


def send(conn: ClientConnection, frame: dict[str, Any] | str) -> None:
    conn.send(frame if isinstance(frame, str) else json.dumps(frame))


def receive(conn: ClientConnection, timeout: float = 120) -> dict[str, Any]:
    message = conn.recv(timeout=timeout)
    assert isinstance(message, str), "respond sends text frames"
    event: dict[str, Any] = json.loads(message)
    return event


def turn(conn: ClientConnection, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one response.create and read events up to the terminal (or error) event.

    Every event is validated against the spec: streaming events by their own schema,
    errors as WebSocketErrorEvent.
    """
    send(conn, {"type": "response.create", **body})
    events = []
    while True:
        event = receive(conn)
        events.append(event)
        if event["type"] == "error":
            validate(event, "WebSocketErrorEvent")
            return events
        validate_event(event)
        if event["type"] in TERMINAL:
            return events


def error_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["type"] == "error", f"expected an error event, got {events[-1]['type']}"
    error: dict[str, Any] = events[-1]
    return error
