"""Wait for a stored response to reach a state (background runs move on their own)."""

from __future__ import annotations

import time
from typing import Any

import httpx


def wait_for(
    base_url: str, response_id: str, done: Any, timeout: float = 120, **kw: Any
) -> dict[str, Any]:
    """Poll GET /v1/responses/{id} until `done(body)` is true; returns that body."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = httpx.get(f"{base_url}/responses/{response_id}", **kw).json()
        if done(body):
            return body
        assert time.monotonic() < deadline, f"timed out waiting on {response_id}: {body}"
        time.sleep(0.05)


def stored_events(
    base_url: str, response_id: str, after: int = -1, **kw: Any
) -> list[dict[str, Any]]:
    """The stored event stream (GET ?stream=true), parsed."""
    import json

    from tests.support.sse import read_events

    with httpx.stream(
        "GET",
        f"{base_url}/responses/{response_id}",
        params={"stream": "true", "starting_after": str(after)},
        timeout=120,
        **kw,
    ) as reply:
        assert reply.status_code == 200, reply.read()
        return [json.loads(json.dumps(e)) for e in read_events(reply)]


def has_text(body: dict[str, Any]) -> bool:
    """The run is generating: it has produced some output text."""
    return (
        bool(body["output"])
        and bool(body["output"][0].get("content"))
        and bool(body["output"][0]["content"][0].get("text"))
    )


def folded(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Stored events (checked against the spec, in sequence) folded into the response they
    describe, as respond's own fold does: what GET /v1/responses/{id} must answer."""
    from pydantic import TypeAdapter

    from respond.protocol.events import Event
    from respond.responses.fold import fold_events
    from tests.support.schema import validate_event

    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    parsed = TypeAdapter(list[Event]).validate_python(events)
    response: dict[str, Any] = fold_events(parsed).model_dump(mode="json")
    return response
