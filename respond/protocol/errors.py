"""The one error envelope: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["APIError", "error_body", "from_validation_error"]

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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _TYPES.get(status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(
    message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _param_path(loc: tuple[int | str, ...], skip: frozenset[str]) -> str:
    """('input', 3, 'content', 0, 'type') -> 'input[3].content[0].type'.

    Union branch labels that pydantic inserts into locations (tag names, type names
    such as 'list[...]') are not fields the client wrote, so they are dropped.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in skip or not part.isidentifier():
            continue
        else:
            out += f".{part}" if out else part
    return out


def from_validation_error(exc: ValidationError, skip: frozenset[str] = frozenset()) -> APIError:
    """Turn the first pydantic error into a client-readable 400 naming the field."""
    errors = exc.errors(include_url=False)
    # In a union (input: str | list[item]) every branch reports; the deepest location is
    # the branch the client meant ("input[3]: unknown type", not "input: not a string").
    err = max(errors, key=lambda e: len(e["loc"]))
    param = _param_path(tuple(err["loc"]), skip) or None
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        message = f"Missing required parameter: '{param}'."
    elif kind == "extra_forbidden":
        message = f"Unknown parameter: '{param}'."
    elif kind == "union_tag_invalid":
        message = (
            f"Invalid value for '{param}': unsupported type '{ctx.get('tag')}'; "
            f"expected one of {ctx.get('expected_tags')}."
        )
    else:
        message = f"Invalid value for '{param}': {err['msg']}."
    return APIError(400, message, param=param, code=_code_for(kind))


def _code_for(kind: str) -> str:
    if kind == "missing":
        return "missing_required_parameter"
    if kind == "extra_forbidden":
        return "unknown_parameter"
    return "invalid_value"
