"""The request limits of a Responses body, checked before anything else is done with it.

Counts and sizes (input items, tools), ids, then every schema and regex a grammar would
be built from. The limits themselves are `Limits` (respond/protocol/limits.py).
"""

from __future__ import annotations

import json

from respond.engines.grammars import GrammarError, parse_grammar
from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, check_count, check_id
from respond.protocol.requests import CreateResponseBody, TextFormatJsonSchema
from respond.protocol.schema_limits import SchemaBudget, check_schema
from respond.protocol.tools import (
    CustomTool,
    CustomToolGrammar,
    FunctionTool,
    NamespaceTool,
    Tool,
)

__all__ = ["check_request"]


def check_request(body: CreateResponseBody, limits: Limits) -> None:
    if body.previous_response_id is not None:
        check_id(body.previous_response_id, "previous_response_id", limits, "response")
    conversation = body.conversation
    if conversation is not None:
        value = conversation if isinstance(conversation, str) else conversation.id
        check_id(value, "conversation", limits, "conversation")
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


def _check_tools(tools: list[Tool], limits: Limits) -> None:
    check_count(tools, "tools", limits.tools)
    sent = [tool.model_dump(mode="json", by_alias=True, exclude_unset=True) for tool in tools]
    size = len(json.dumps(sent, separators=(",", ":")))
    if size > limits.tools_bytes:
        raise APIError(
            400,
            f"The tool definitions are {size} bytes as JSON, over the limit of "
            f"{limits.tools_bytes}.",
            param="tools",
            code="invalid_value",
        )


def _check_tool_schemas(tool: Tool, where: str, limits: Limits, budget: SchemaBudget) -> None:
    if isinstance(tool, NamespaceTool):
        for index, member in enumerate(tool.tools):
            _check_tool_schemas(member, f"{where}.tools[{index}]", limits, budget)
    elif isinstance(tool, FunctionTool):
        # A non-strict tool whose schema cannot be enforced is decoded as any JSON object
        # (engines/llamacpp/_decoding.py), so its bounds are never expanded into a grammar:
        # Claude Code's tools carry `maxLength: 524288`.
        if tool.parameters is not None and tool.strict is not False:
            check_schema(
                tool.parameters, f"{where}.parameters", limits, budget, code="invalid_json_schema"
            )
    elif isinstance(tool, CustomTool) and isinstance(tool.format, CustomToolGrammar):
        _check_grammar(tool.format, f"{where}.format.definition", limits)


def _check_grammar(fmt: CustomToolGrammar, param: str, limits: Limits) -> None:
    """A custom tool's grammar parses and uses only what can be enforced, within limits."""
    definition = fmt.definition
    if fmt.syntax == "regex" and len(definition) > limits.pattern_length:
        why = f"it is longer than {limits.pattern_length} characters"
    else:
        try:
            parse_grammar(fmt.syntax, definition, max_repeat=limits.repetition)
            return
        except GrammarError as exc:
            why = str(exc)
        except RecursionError:
            why = "it nests too deeply"
    raise APIError(
        400,
        f"Invalid {fmt.syntax} grammar in '{param}': {why}.",
        param=param,
        code="invalid_grammar",
    )
