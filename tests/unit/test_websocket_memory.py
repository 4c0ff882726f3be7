"""What a WebSocket connection remembers for previous_response_id, and when it forgets."""

from __future__ import annotations

from typing import Any, cast

import pytest

from respond.api.websocket import REMEMBERED, Connection
from respond.protocol.errors import APIError
from respond.protocol.items import MessageItem, OutputText
from respond.protocol.requests import InputMessage
from respond.protocol.resource import ResponseResource


def connection() -> Connection:
    # Memory never touches the socket or the service.
    return Connection(cast(Any, None), cast(Any, None), tenant=None)


def response(n: int, *, store: bool) -> ResponseResource:
    answer = MessageItem(id=f"msg_{n}", status="completed", content=[OutputText(text=f"a{n}")])
    return ResponseResource(
        id=f"resp_{n}",
        created_at=0,
        status="completed",
        model="m",
        output=[answer],
        store=store,
    )


def remember(conn: Connection, n: int, *, store: bool) -> None:
    conn._remember(response(n, store=store), [InputMessage(role="user", content=f"q{n}")])


def assert_not_found(conn: Connection, response_id: str) -> None:
    with pytest.raises(APIError) as missing:
        conn._history(response_id)
    assert missing.value.code == "previous_response_not_found"
    assert missing.value.param == "previous_response_id"


def test_context_is_input_then_output() -> None:
    conn = connection()
    remember(conn, 1, store=False)
    context = conn._history("resp_1")
    assert context is not None
    assert [item.type for item in context] == ["message", "message"]
    assert [cast(InputMessage, item).role for item in context] == ["user", "assistant"]


def test_unknown_ids_are_left_to_the_store() -> None:
    assert connection()._history("resp_elsewhere") is None
    assert connection()._history(None) is None


def test_failure_forgets_store_false_but_not_stored_responses() -> None:
    conn = connection()
    remember(conn, 1, store=False)
    remember(conn, 2, store=True)
    conn._forget_all()
    assert_not_found(conn, "resp_1")
    assert conn._history("resp_2") is None  # the store still has it


def test_oldest_is_evicted_beyond_the_limit() -> None:
    conn = connection()
    for n in range(REMEMBERED + 1):
        remember(conn, n, store=False)
    assert_not_found(conn, "resp_0")
    assert conn._history(f"resp_{REMEMBERED}") is not None


def test_using_a_response_keeps_it() -> None:
    conn = connection()
    remember(conn, 0, store=False)
    for n in range(1, REMEMBERED + 1):
        conn._history("resp_0")  # continuing from it marks it recently used
        remember(conn, n, store=False)
    assert conn._history("resp_0") is not None
    assert_not_found(conn, "resp_1")
