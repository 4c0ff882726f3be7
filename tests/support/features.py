"""Probes for server features that other parts of respond deliver.

Client tests that need such a feature skip, naming it, while the server lacks it, and run
by themselves once it lands. Each probe asks the real server, so a skip always means the
feature is really missing, never that a test was switched off by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.server import Server

PREVIOUS_RESPONSE_ID = (
    "needs stored previous_response_id resolution (issue 3: store): the server does not "
    "answer an unknown previous_response_id with 404 previous_response_not_found"
)
FUNCTION_CALLS = (
    "needs function calling (issue 4: tools): tool_choice='required' does not produce a "
    "function_call item"
)
STRUCTURED_OUTPUTS = (
    "needs structured outputs (issue 4: tools/structured outputs): a json_schema text.format "
    "does not yield JSON that matches the schema"
)


def _post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=120)


_seen: dict[tuple[str, str], bool] = {}


def _probe(server: Server, name: str, check: Callable[[Server], bool]) -> bool:
    key = (server.base_url, name)
    if key not in _seen:
        _seen[key] = check(server)
    return _seen[key]


def _resolves_previous_response_id(server: Server) -> bool:
    reply = _post(
        server,
        {"input": "hi", "previous_response_id": "resp_probe_missing", "max_output_tokens": 1},
    )
    return reply.status_code == 404


def _calls_functions(server: Server) -> bool:
    tool = {
        "type": "function",
        "name": "get_time",
        "description": "Current time",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    }
    reply = _post(
        server,
        {"input": "time?", "tools": [tool], "tool_choice": "required", "max_output_tokens": 32},
    )
    if reply.status_code != 200:
        return False
    return any(item.get("type") == "function_call" for item in reply.json().get("output", []))


def _enforces_json_schema(server: Server) -> bool:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "name": "city", "schema": schema, "strict": True}
    reply = _post(
        server,
        {"input": "A city?", "text": {"format": fmt}, "max_output_tokens": 48, "temperature": 0},
    )
    if reply.status_code != 200:
        return False
    texts = [
        part.get("text", "")
        for item in reply.json().get("output", [])
        for part in item.get("content", [])
    ]
    try:
        value = json.loads("".join(texts))
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("population"), int)


def resolves_previous_response_id(server: Server) -> bool:
    return _probe(server, "previous_response_id", _resolves_previous_response_id)


def calls_functions(server: Server) -> bool:
    return _probe(server, "function_calls", _calls_functions)


def enforces_json_schema(server: Server) -> bool:
    return _probe(server, "json_schema", _enforces_json_schema)
