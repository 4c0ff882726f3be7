"""Every request limit, in one place, and the checks that need nothing but the body.

Each check raises APIError 400 naming the field (`param`) and the limit, before any
work is done for the request: a body that passes them costs bounded time and memory
to validate, render, tokenize and turn into a grammar. docs/api.md lists them all; the
ones a deployment may reasonably need to raise are flags (see respond/cli.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from respond._ids import PREFIXES
from respond.protocol.errors import APIError

__all__ = [
    "Limits",
    "check_count",
    "check_id",
    "check_kind",
    "check_json",
    "json_path",
    "load_json",
]


@dataclass(frozen=True)
class Limits:
    # The whole body (also every WebSocket frame).
    body_depth: int = 64  # nesting of JSON objects and arrays
    id_length: int = 256  # previous_response_id, conversation, item and call ids
    # POST /v1/responses (and input_tokens, compact, WebSocket response.create).
    input_items: int = 10_000  # flag: --max-input-items
    tools: int = 128  # flag: --max-tools
    tools_bytes: int = 1024 * 1024  # all tool definitions together, as JSON
    # JSON Schemas (text.format and function parameters) and regexes (pattern, custom tools).
    schema_depth: int = 32  # nesting of subschemas
    schema_nodes: int = 10_000  # subschemas and keywords, all schemas of a request together
    repetition: int = 1_000  # minLength/maxLength/minItems/maxItems and regex {m,n} bounds
    enum_values: int = 1_000  # values of one enum
    pattern_length: int = 1_000  # characters of one regex
    grammar_bytes: int = 256 * 1024  # the grammar an engine builds from all of the above


# ---------------------------------------------------------------- the JSON body


def json_path(parts: Sequence[str | int]) -> str:
    """('input', 3, 'content') -> 'input[3].content' (the OpenAI `param` style)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def load_json(raw: bytes | str, limits: Limits, what: str) -> dict[str, Any]:
    """A JSON object within the body limits (nesting, valid Unicode, no NUL), else a 400.

    `what` names it in errors: "request body", "frame"."""
    try:
        data = json.loads(raw)
    except RecursionError:  # nested deeper than the parser goes: far over the limit
        raise APIError(
            400,
            f"The {what} is nested more than {limits.body_depth} levels deep.",
            code="invalid_json",
        ) from None
    except ValueError as exc:  # includes UnicodeDecodeError for bytes that are not UTF-8
        raise APIError(400, f"The {what} is not valid JSON: {exc}.", code="invalid_json") from exc
    if not isinstance(data, dict):
        raise APIError(400, f"The {what} must be a JSON object.", code="invalid_json")
    check_json(data, limits)
    return data


def check_json(data: Any, limits: Limits) -> None:
    """Nesting depth, then every string (keys too): valid Unicode, no NUL.

    A JSON escape can name a lone UTF-16 surrogate (\\ud800): Python keeps it in a str
    that can never be encoded again, so it would fail later, when answering or storing;
    PostgreSQL cannot store NUL in text.

    Iterative, so no body can exhaust the Python stack; the path of a bad value is
    only worked out once one is found.
    """
    if not isinstance(data, dict | list):
        return
    # trail: (parent, key) of every container seen, so a path can be rebuilt from an index.
    trail: list[tuple[int, str | int]] = []
    stack: list[tuple[dict[str, Any] | list[Any], int, int]] = [(data, 1, -1)]
    while stack:
        value, depth, at = stack.pop()
        if depth > limits.body_depth:
            raise APIError(
                400,
                f"The request body is nested more than {limits.body_depth} levels deep.",
                param=_path(trail, at) or None,
                code="invalid_value",
            )
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in pairs:
            if isinstance(key, str):
                _check_string(key, trail, at, key)
            if isinstance(child, str):
                _check_string(child, trail, at, key)
            elif isinstance(child, dict | list):
                trail.append((at, key))
                stack.append((child, depth + 1, len(trail) - 1))


def _check_string(text: str, trail: list[tuple[int, str | int]], at: int, key: str | int) -> None:
    if text.isascii():
        if "\x00" in text:
            raise _bad_string(trail, at, key, "contains a NUL character (\\u0000)")
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad_string(trail, at, key, "is not valid Unicode (a lone surrogate)") from None
    if "\x00" in text:
        raise _bad_string(trail, at, key, "contains a NUL character (\\u0000)")


def _bad_string(trail: list[tuple[int, str | int]], at: int, key: str | int, why: str) -> APIError:
    param = _shown(json_path([*_parts(trail, at), key]))
    return APIError(
        400, f"Invalid value for '{param}': it {why}.", param=param, code="invalid_value"
    )


def _shown(text: str) -> str:
    """`text` safe to echo in an error: the bad characters escaped, as JSON would."""
    return "".join(
        c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else f"\\u{ord(c):04x}"
        for c in text
    )


def _path(trail: list[tuple[int, str | int]], at: int) -> str:
    return json_path(_parts(trail, at))


def _parts(trail: list[tuple[int, str | int]], at: int) -> list[str | int]:
    parts: list[str | int] = []
    while at >= 0:
        at, key = trail[at]
        parts.append(key)
    return parts[::-1]


# ---------------------------------------------------------------- ids and sizes


def check_id(value: str, param: str, limits: Limits, kind: str | None = None) -> None:
    """An id from a path, a query or a body: bounded, printable, valid Unicode, and (given
    its `kind`) with the prefix every id of that kind has (respond._ids.PREFIXES)."""
    if len(value) > limits.id_length:
        raise APIError(
            400,
            f"Invalid '{param}': ids are at most {limits.id_length} characters.",
            param=param,
            code="invalid_value",
        )
    if not value.isprintable():
        raise APIError(
            400,
            f"Invalid '{param}': an id may not contain control characters.",
            param=param,
            code="invalid_value",
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise APIError(
            400, f"Invalid '{param}': it is not valid Unicode.", param=param, code="invalid_value"
        ) from None
    if kind is not None:
        check_kind(value, param, kind)


def check_kind(value: str, param: str, kind: str) -> None:
    """OpenAI's own answer to an id of the wrong shape (a 404 would say it might exist)."""
    prefix = PREFIXES[kind]
    if not value.startswith(f"{prefix}_"):
        raise APIError(
            400,
            f"Invalid '{param}': '{value[:64]}'. Expected an ID that begins with '{prefix}'.",
            param=param,
            code="invalid_value",
        )


def check_count(items: Sequence[Any] | Mapping[str, Any], param: str, limit: int) -> None:
    if len(items) > limit:
        raise APIError(
            400,
            f"Too many values in '{param}': {len(items)}, the limit is {limit}.",
            param=param,
            code="invalid_value",
        )
