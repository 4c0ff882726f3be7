"""Read an SSE stream strictly: every frame must be `event: <type>\\ndata: <json>\\n\\n`, or
a comment (`: keep-alive`), which is skipped."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import httpx


def read_events(response: httpx.Response) -> Generator[dict[str, Any], None, None]:
    buffer = b""
    for chunk in response.iter_raw():
        assert b"\r" not in chunk, "SSE frames must use LF line endings only"
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            lines = frame.decode().split("\n")
            if all(line.startswith(":") for line in lines):
                continue  # a comment: respond's keep-alive while a long prompt is read
            assert len(lines) == 2, f"unexpected frame shape: {frame!r}"
            assert lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
            event = json.loads(lines[1][len("data: ") :])
            assert event["type"] == lines[0][len("event: ") :], "event name differs from data.type"
            yield event
    assert buffer == b"", f"stream ended mid-frame: {buffer!r}"


def stream_events(url: str, body: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """POST `body` to `url` and read its whole event stream (a 200 asserted first)."""
    with httpx.stream("POST", url, json=body, timeout=timeout) as reply:
        assert reply.status_code == 200, reply.read()
        return list(read_events(reply))
