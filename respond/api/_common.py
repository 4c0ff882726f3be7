"""What every route shares: body parsing with OpenAI-style errors, auth, SSE framing."""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.events import Event
from respond.protocol.limits import Limits, load_json

__all__ = ["KeyRing", "parse_body", "sse_frames", "tenant_of"]

M = TypeVar("M", bound=BaseModel)


async def parse_body(request: Request, model: type[M], *, max_bytes: int) -> M:
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise APIError(
                413,
                f"Request body is larger than the {max_bytes // (1024 * 1024)} MiB limit.",
                code="request_too_large",
            )
    limits: Limits = request.app.state.responses.limits
    data = load_json(bytes(raw), limits, "request body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, data) from exc


@dataclass(frozen=True)
class KeyRing:
    """API keys, each belonging to a tenant (the name before ':' in a key file line)."""

    keys: tuple[tuple[str | None, str], ...] = ()

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> KeyRing:
        keys: list[tuple[str | None, str]] = []
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, key = line.partition(":")
            keys.append((name, key) if sep else (None, line))
        return cls(tuple(keys))

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def tenant(self, authorization: str | None) -> str | None:
        """The tenant for an Authorization header; raises 401 when a key is required and wrong."""
        if not self.enabled:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise APIError(
                401,
                "Missing API key. Send 'Authorization: Bearer <key>' (see --api-key).",
                code="invalid_api_key",
            )
        found: str | None = None
        matched = False
        for name, key in self.keys:
            # Compare with every key, in constant time, so timing reveals nothing.
            if hmac.compare_digest(key.encode(), token.encode()):
                found, matched = name, True
        if not matched:
            raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")
        return found


def tenant_of(request: Request) -> str | None:
    ring: KeyRing = request.app.state.keys
    return ring.tenant(request.headers.get("authorization"))


def sse_frame(event: Event | dict[str, Any], name: str | None = None) -> bytes:
    if isinstance(event, BaseModel):
        return f"event: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    prefix = f"event: {name}\n" if name else ""
    return f"{prefix}data: {data}\n\n".encode()


async def sse_frames(events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    async for event in events:
        yield sse_frame(event)
