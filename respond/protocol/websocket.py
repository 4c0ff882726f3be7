"""WebSocket mode of /v1/responses: the client's `response.create` frame and the error event.

Progress messages on the socket are the ordinary streaming events (protocol/events.py);
only these two shapes are particular to the socket (Open Responses
`WebSocketResponseCreateEvent` and `WebSocketErrorEvent`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from respond.protocol._base import Wire
from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.limits import Limits, load_json
from respond.protocol.requests import CreateResponseBody

__all__ = ["ResponseCreateFrame", "WebSocketError", "WebSocketErrorEvent", "parse_frame"]

CREATE = "response.create"

# Fields that mean something only over HTTP. A socket always streams, so `stream` and
# `stream_options` are dropped rather than refused (clients that share one body builder
# between transports send them); a background run cannot live on a socket, so that is refused.
_HTTP_ONLY = ("stream", "stream_options")


@dataclass(frozen=True)
class ResponseCreateFrame:
    """A parsed `response.create`: the create body, and whether to generate at all.

    `generate: false` (a warm-up) creates a response with no output that later turns can
    chain from with previous_response_id.
    """

    body: CreateResponseBody
    generate: bool = True


class WebSocketError(Wire):
    type: str
    code: str
    message: str
    param: str | None = None


class WebSocketErrorEvent(Wire):
    type: Literal["error"] = "error"
    status: int
    error: WebSocketError

    @classmethod
    def of(cls, exc: APIError) -> WebSocketErrorEvent:
        return cls(
            status=exc.status,
            error=WebSocketError(
                type=exc.type, code=exc.code or exc.type, message=exc.message, param=exc.param
            ),
        )


def parse_frame(raw: str | bytes, limits: Limits) -> ResponseCreateFrame:
    """One client frame -> a create request, or APIError saying what is wrong with it."""
    data = load_json(raw, limits, "frame")
    kind = data.pop("type", None)
    if kind != CREATE:
        shown = "missing" if kind is None else repr(kind)
        raise APIError(
            400,
            f"Unsupported client event type ({shown}); send {{'type': '{CREATE}', ...}}.",
            param="type",
            code="invalid_value" if kind is not None else "missing_required_parameter",
        )
    if data.get("background"):
        raise APIError(
            400,
            "background is not supported in WebSocket mode; use HTTP for background runs.",
            param="background",
            code="unsupported_parameter",
        )
    data.pop("background", None)
    for name in _HTTP_ONLY:
        data.pop(name, None)
    generate = data.pop("generate", True)
    if not isinstance(generate, bool):
        raise APIError(
            400,
            "Invalid value for 'generate': expected a boolean.",
            param="generate",
            code="invalid_value",
        )
    try:
        body = CreateResponseBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, data) from exc
    return ResponseCreateFrame(body=body, generate=generate)
