"""The drain gate at the ASGI level: a new WebSocket connection while draining is closed at
once with code 1012 and the reason; the app behind the gate never sees it."""

from __future__ import annotations

import asyncio
from typing import Any

from respond._drain import SERVICE_RESTART, Drain, DrainGate

SOCKET = {"type": "websocket", "path": "/v1/responses", "headers": []}


def gated(scope: dict[str, Any], *, draining: bool) -> tuple[list[dict[str, Any]], bool]:
    """The messages the gate sends for `scope`, and whether the app behind it was called."""
    drain = Drain(timeout=30)
    if draining:
        drain.begin()
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(DrainGate(app, drain)(scope, receive, send))
    return sent, bool(reached)


def test_a_socket_passes_when_not_draining() -> None:
    assert gated(SOCKET, draining=False) == ([], True)


def test_a_socket_is_closed_with_1012_and_the_reason_while_draining() -> None:
    sent, reached = gated(SOCKET, draining=True)
    assert not reached
    assert sent[0] == {"type": "websocket.accept"}
    assert sent[1]["type"] == "websocket.close"
    assert sent[1]["code"] == SERVICE_RESTART == 1012
    assert "shutting down" in sent[1]["reason"]
    assert len(sent[1]["reason"].encode()) <= 123  # what a close frame can carry
