"""The exception handlers the app is handed: each failure becomes one APIError, answered in
the envelope of the API the request came through, chosen in one place (`answer`): Anthropic's
under /v1/messages, OpenAI's everywhere else."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from respond.api import messages
from respond.protocol.errors import APIError, from_error_list
from respond.store.base import StoreFullError, StoreUnavailableError

__all__ = ["EXCEPTION_HANDLERS", "answer"]

log = logging.getLogger("respond")

Handler = Callable[[Request, Any], Awaitable[JSONResponse]]


def answer(request: Request, error: APIError) -> JSONResponse:
    """`error` in the envelope of the request's API."""
    if request.url.path.startswith(messages.MESSAGES_PREFIX):
        return messages.error_response(
            request, error.status, error.message, error.__cause__, headers=error.headers
        )
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _api_error(request: Request, exc: APIError) -> JSONResponse:
    return answer(request, exc)


async def _store_full(request: Request, exc: StoreFullError) -> JSONResponse:
    log.error("refused %s %s: %s", request.method, request.url.path, exc)
    return answer(request, APIError(507, str(exc), type="server_error", code="storage_full"))


async def _store_unavailable(request: Request, exc: StoreUnavailableError) -> JSONResponse:
    log.warning("refused %s %s: %s", request.method, request.url.path, exc)
    error = APIError(
        503,
        str(exc),
        type="server_error",
        code="store_unavailable",
        headers={"Retry-After": "1"},
    )
    return answer(request, error)


# Every error has a code: routing errors too.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    message = "Not found." if exc.status_code == 404 else str(exc.detail)
    code = _HTTP_CODES.get(exc.status_code, kind)
    return answer(request, APIError(exc.status_code, message, type=kind, code=code))


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return answer(request, _request_error(exc))


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    # A bug, not the client's fault: still the error envelope, and logged in full.
    log.error("unhandled error", exc_info=exc)
    message = "The server had an error processing the request."
    return answer(request, APIError(500, message, type="server_error", code="server_error"))


def _request_error(exc: RequestValidationError) -> APIError:
    """A typed body's errors (located under "body") or a query parameter's, as one 400."""
    errors = exc.errors()
    where = errors[0]["loc"][0] if errors and errors[0]["loc"] else "body"
    if where == "body":
        located = [{**e, "loc": tuple(e["loc"])[1:]} for e in errors]
        return from_error_list(located, exc.body if exc.body is not None else {})
    first = errors[0]
    param = ".".join(str(part) for part in first["loc"][1:]) or None
    return APIError(
        400, f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value"
    )


EXCEPTION_HANDLERS: dict[Any, Handler] = {
    APIError: _api_error,
    StoreFullError: _store_full,
    StoreUnavailableError: _store_unavailable,
    StarletteHTTPException: _http_error,
    RequestValidationError: _validation_error,
    Exception: _server_error,
}
