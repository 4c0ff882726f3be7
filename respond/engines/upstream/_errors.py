"""An upstream's failures as EngineErrors: what the client caused keeps a 4xx, the rest is 502
(504 for a timeout)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx

from respond.engines._base import EngineError

__all__ = ["UpstreamHTTPError", "describe", "http_error", "refusal", "upstream_error"]


class UpstreamHTTPError(EngineError):
    """The upstream answered with an HTTP error status before streaming anything.

    What the client caused (see `refusal`) keeps a 4xx; anything else is a 502.
    """

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        status: int = 502,
        code: str = "upstream_error",
        param: str | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, param=param)
        self.upstream_status = upstream_status
        # How long the prompt was, when a context_length_exceeded refusal says so.
        self.prompt_tokens = prompt_tokens


def upstream_error(message: str, *, timeout: bool = False) -> EngineError:
    if timeout:
        return EngineError(message, code="upstream_timeout", status=504)
    return EngineError(message, code="upstream_error", status=502)


async def http_error(base_url: str, response: httpx.Response, limit: float) -> EngineError:
    """The EngineError for an HTTP error status, read from its body (under `limit` seconds)."""
    try:
        async with asyncio.timeout(limit):
            raw = await response.aread()
    except (TimeoutError, httpx.HTTPError):
        raw = b"(the error body could not be read)"
    message = raw.decode("utf-8", errors="replace").strip()
    kind = ""  # the error's own code and type, which name some refusals better than words
    prompt: int | None = None
    try:
        error = json.loads(raw).get("error")
        if isinstance(error, dict):
            message = str(error.get("message") or message)
            kind = f"{error.get('code') or ''} {error.get('type') or ''}"
            if isinstance(error.get("n_prompt_tokens"), int):  # llama-server says it
                prompt = int(error["n_prompt_tokens"])
        elif isinstance(error, str):
            message = error
    except (ValueError, AttributeError):
        pass
    status = response.status_code
    text = f"The upstream {base_url} answered {status}: {message[:2000]}"
    if prompt is None and (said := _PROMPT.search(message)):  # llama-cpp-python, vLLM
        prompt = int(said[1] or said[2])
    return UpstreamHTTPError(
        text, upstream_status=status, prompt_tokens=prompt, **refusal(status, message, kind)
    )


_CONTEXT = re.compile(r"context.(length|size|window)|maximum context|too many tokens", re.I)
_PROMPT = re.compile(r"(\d+) (?:tokens )?in the messages|has (\d+) input tokens", re.I)
_IMAGE = re.compile(r"image.*not supported|not support.*image|mmproj|multimodal", re.I)


def refusal(status: int, message: str, kind: str = "") -> dict[str, Any]:
    """The client's error for an upstream's refusal: what the request caused stays a 4xx.

    A prompt too long for the upstream's context is 400 context_length_exceeded; an image
    sent to a text-only upstream is 400 unsupported_content (llama-server says so with a
    500); other 400/413/422 are the request's fault too, and 429 is passed on. 401, 403 and
    404 are respond's configuration (its key, its model name), so they stay 502.
    """
    if _CONTEXT.search(message) or "context" in kind:
        return {"status": 400, "code": "context_length_exceeded", "param": "input"}
    if _IMAGE.search(message):
        return {"status": 400, "code": "unsupported_content", "param": "input"}
    if status in (400, 413, 422):
        return {"status": 400, "code": "invalid_request_error"}
    if status == 429:
        return {"status": 429, "code": "rate_limit_exceeded"}
    return {}


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
