"""The request limits of a Responses body, checked before anything else is done with it.

Counts and sizes (input items, tools), ids, then every schema and regex a grammar would
be built from. The limits themselves are `Limits` (respond/protocol/limits.py).
"""

from __future__ import annotations

import json
from typing import Any

from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, check_count, check_id
from respond.protocol.requests import CreateResponseBody, TextFormatJsonSchema
from respond.protocol.schema_limits import SchemaBudget, check_regex, check_schema

__all__ = ["check_request"]


def check_request(body: CreateResponseBody, limits: Limits) -> None:
    if body.previous_response_id is not None:
        check_id(body.previous_response_id, "previous_response_id", limits)
    conversation = body.conversation
    if conversation is not None:
        value = conversation if isinstance(conversation, str) else conversation.id
        check_id(value, "conversation", limits)
    _check_input(body, limits)
    _check_tools(body.tools, limits)
    if body.max_tool_calls is not None and body.max_tool_calls > limits.repetition:
        raise APIError(
            400,
            f"Invalid 'max_tool_calls': at most {limits.repetition} (the calls a grammar allows "
            "are spelled out in it).",
            param="max_tool_calls",
            code="invalid_value",
        )
    budget = SchemaBudget(limits.schema_nodes)
    fmt = body.text.format
    if isinstance(fmt, TextFormatJsonSchema):
        check_schema(fmt.schema_, "text.format.schema", limits, budget, code="invalid_json_schema")
    for index, tool in enumerate(body.tools):
        _check_tool_schemas(tool, f"tools[{index}]", limits, budget)


def _check_input(body: CreateResponseBody, limits: Limits) -> None:
    if isinstance(body.input, str):
        return
    check_count(body.input, "input", limits.input_items)
    for index, item in enumerate(body.input):
        for name in ("id", "call_id"):
            value = getattr(item, name, None)
            if isinstance(value, str):
                check_id(value, f"input[{index}].{name}", limits)


def _check_tools(tools: list[dict[str, Any]], limits: Limits) -> None:
    check_count(tools, "tools", limits.tools)
    size = len(json.dumps(tools, separators=(",", ":")))
    if size > limits.tools_bytes:
        raise APIError(
            400,
            f"The tool definitions are {size} bytes as JSON, over the limit of "
            f"{limits.tools_bytes}.",
            param="tools",
            code="invalid_value",
        )


def _check_tool_schemas(
    tool: dict[str, Any], where: str, limits: Limits, budget: SchemaBudget
) -> None:
    kind = tool.get("type")
    if kind == "function":
        parameters = tool.get("parameters")
        # A non-strict tool whose schema cannot be enforced is decoded as any JSON object
        # (engines/llamacpp/_decoding.py), so its bounds are never expanded into a grammar:
        # Claude Code's tools carry `maxLength: 524288`.
        if isinstance(parameters, dict) and tool.get("strict") is not False:
            check_schema(
                parameters, f"{where}.parameters", limits, budget, code="invalid_json_schema"
            )
    elif kind == "custom":
        fmt = tool.get("format")
        if fmt is not None and not isinstance(fmt, dict):
            raise APIError(
                400,
                f"Invalid value for '{where}.format': expected an object such as "
                '{"type": "text"} or {"type": "grammar", "syntax": "regex", "definition": ...}.',
                param=f"{where}.format",
                code="invalid_value",
            )
        if isinstance(fmt, dict) and fmt.get("type") == "grammar":
            definition = fmt.get("definition")
            if not isinstance(definition, str):
                raise APIError(
                    400,
                    f"Invalid value for '{where}.format.definition': expected a string.",
                    param=f"{where}.format.definition",
                    code="invalid_value",
                )
            if fmt.get("syntax") == "regex":
                check_regex(
                    definition, f"{where}.format.definition", limits, code="invalid_grammar"
                )
