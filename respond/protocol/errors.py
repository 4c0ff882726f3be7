"""The one error envelope: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "APIError",
    "ErrorBody",
    "ErrorDetail",
    "error_body",
    "from_error_list",
    "from_validation_error",
]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


# The code of an error raised without one: every error the client sees has a code.
_CODES = {
    400: "invalid_value",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "request_too_large",
    429: "rate_limit_exceeded",
}


class APIError(Exception):
    """An error the client should see, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})  # e.g. Retry-After on a 429
        self.message = message
        self.param = param
        self.code = code or _CODES.get(
            status, "server_error" if status >= 500 else "invalid_request"
        )
        self.type = type or _TYPES.get(status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """The envelope of every error answer (documented in the served OpenAPI document)."""

    error: ErrorDetail


def error_body(
    message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _param_path(loc: tuple[int | str, ...], data: Any, *, missing: bool = False) -> str:
    """('input', 3, 'content', 0, 'type') -> 'input[3].content[0].type'.

    pydantic puts union branch labels (tag names, 'str', 'list[...]') into locations.
    Walking the client's own data tells them apart: a real field is a key there (or,
    for a missing field, the last element of the location).
    """
    out = ""
    for position, part in enumerate(loc):
        if isinstance(part, int) and isinstance(data, list) and part < len(data):
            out += f"[{part}]"
            data = data[part]
        elif isinstance(part, str) and isinstance(data, dict) and part in data:
            out += f".{part}" if out else part
            data = data[part]
        elif missing and position == len(loc) - 1 and isinstance(part, str):
            out += f".{part}" if out else part
    return out


def from_validation_error(exc: ValidationError, data: Any) -> APIError:
    """Turn a pydantic error into a client-readable 400 naming the field."""
    return from_error_list(exc.errors(include_url=False), data)


def from_error_list(errors: Sequence[Mapping[str, Any]], data: Any) -> APIError:
    """The same, from pydantic's error dicts (as FastAPI reports a typed body's errors)."""

    # For unions pydantic reports one error per branch; the deepest location is the
    # branch the client meant (a list of items, not the plain-string alternative).
    def path(error: Mapping[str, Any]) -> str:
        return _param_path(tuple(error["loc"]), data, missing=error["type"] == "missing")

    err = max(errors, key=lambda e: len(path(e)))
    param = path(err) or None
    kind = err["type"]
    if kind == "missing":
        message = f"Missing required parameter: '{param}'."
    elif kind == "extra_forbidden":
        message = f"Unknown parameter: '{param}'."
    elif param is None:
        message = f"Invalid request body: {err['msg']}."
    else:
        message = f"Invalid value for '{param}': {err['msg']}."
    return APIError(400, message, param=param, code=_code_for(kind))


def _code_for(kind: str) -> str:
    if kind == "missing":
        return "missing_required_parameter"
    if kind == "extra_forbidden":
        return "unknown_parameter"
    return "invalid_value"
