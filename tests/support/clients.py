"""An `openai` SDK client that checks every Responses body and stream event against the spec."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai

from tests.support.schema import validate_event, validate_response


class _ValidatedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self._inner:
            buffer += chunk
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                _check_frame(frame)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _check_frame(frame: bytes) -> None:
    for line in frame.decode().split("\n"):
        if line.startswith("data: "):
            event: dict[str, Any] = json.loads(line[len("data: ") :])
            if event.get("type", "").startswith("response.") or event.get("type") == "error":
                validate_event(event)


class ValidatingTransport(httpx.HTTPTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if "/responses" not in request.url.path or response.status_code != 200:
            return response
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            assert isinstance(response.stream, httpx.SyncByteStream)
            response.stream = _ValidatedStream(response.stream)
        elif kind.startswith("application/json"):
            response.read()
            body = response.json()
            if body.get("object") == "response":
                validate_response(body)
        return response


def openai_client(base_url: str, api_key: str = "no-key", timeout: float = 120) -> openai.OpenAI:
    http = httpx.Client(transport=ValidatingTransport(), timeout=timeout)
    # The SDK's annotation names httpx2's Client; an httpx one (with our transport) works the same.
    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=http)  # type: ignore[arg-type]
