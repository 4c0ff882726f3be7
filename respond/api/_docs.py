"""What the served OpenAPI document says about answers that FastAPI cannot infer.

Routes return Response objects (JSON or SSE) themselves, so their answer shapes are
declared here once: the error envelope for every 4xx/5xx, and JSON-or-stream answers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from respond.protocol.errors import ErrorBody

__all__ = ["ERRORS", "SSE", "json_or_sse"]

ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "The request is wrong: the error says which param"},
    "5XX": {"model": ErrorBody, "description": "The server or an upstream failed"},
}

SSE: dict[str, Any] = {
    "text/event-stream": {
        "schema": {
            "type": "string",
            "description": "Server-Sent Events: `event: <type>` and `data: <event JSON>` per "
            "event, from response.created to one terminal event.",
        }
    }
}


def json_or_sse(model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """A 200 that is `model` as JSON, or its stream of events (`stream: true`)."""
    return {200: {"model": model, "content": SSE, "description": "JSON, or an event stream"}}
