"""Request-side rules for tools, tool_choice and structured outputs.

Everything here raises APIError (400, naming the param) before anything is streamed:
bad tool definitions, a tool_choice naming a tool that is not there or that respond
cannot run, schemas the engine could not enforce, tool results for unknown calls.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from respond.engines._base import Engine, FunctionSpec, ToolChoice, UnsupportedSchemaError
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    CreateResponseBody,
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    FunctionTool,
    InputItem,
    TextFormatJsonObject,
    TextFormatJsonSchema,
)

__all__ = [
    "check_call_ids",
    "custom_tool_names",
    "enforceable",
    "function_specs",
    "text_constraint",
    "tool_choice",
]

log = logging.getLogger("respond.tools")

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def function_specs(body: CreateResponseBody, engine: Engine) -> list[FunctionSpec]:
    """The function tools the model may call, validated. Other tool types (hosted tools
    such as web_search, which respond does not run) are left out and logged."""
    specs: list[FunctionSpec] = []
    for index, tool in enumerate(body.tools):
        where = f"tools[{index}]"
        kind = tool.get("type")
        if not isinstance(kind, str):
            raise APIError(400, "Each tool needs a 'type'.", param=f"{where}.type")
        if kind == "custom":
            specs.append(_custom_spec(tool, where))
            continue
        if kind in ("mcp", "file_search"):
            continue  # hosted tools: hosted/mcp.py and hosted/file_search.py add them
        if kind != "function":
            log.info("tool type %r is not run by respond; the model does not see it", kind)
            continue
        specs.append(_function_spec(tool, where, engine))
    names = [spec.name for spec in specs]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise APIError(400, f"Duplicate function name '{name}'.", param=f"tools[{index}].name")
    return specs


def _function_spec(tool: dict[str, Any], where: str, engine: Engine) -> FunctionSpec:
    try:
        parsed = FunctionTool.model_validate(tool)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in error["loc"])
        raise APIError(
            400,
            f"Invalid value for '{where}.{field}': {error['msg']}.",
            param=f"{where}.{field}",
            code="invalid_value",
        ) from exc
    parameters = parsed.parameters or {"type": "object", "properties": {}}
    if parameters.get("type", "object") != "object":
        raise APIError(
            400,
            f"Invalid schema for function '{parsed.name}': the parameters must be a JSON "
            "Schema of type 'object'.",
            param=f"{where}.parameters",
            code="invalid_function_parameters",
        )
    strict = True if parsed.strict is None else parsed.strict
    if strict:
        _check_schema(engine, parameters, f"{where}.parameters", f"function '{parsed.name}'")
    return FunctionSpec(
        name=parsed.name, description=parsed.description, parameters=parameters, strict=strict
    )


def custom_tool_names(body: CreateResponseBody) -> frozenset[str]:
    """The names of `custom` tools: their calls become custom_tool_call items."""
    return frozenset(str(tool.get("name")) for tool in body.tools if tool.get("type") == "custom")


def _custom_spec(tool: dict[str, Any], where: str) -> FunctionSpec:
    """A custom tool, shown to the model as a function taking one string, `input`, which
    is constrained by the tool's regex format (Lark grammars are not enforced)."""
    name = tool.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise APIError(
            400,
            f"Invalid value for '{where}.name': 1-64 characters of a-z, A-Z, 0-9, _ and -.",
            param=f"{where}.name",
            code="invalid_value",
        )
    fmt = tool.get("format") or {"type": "text"}
    value: dict[str, Any] = {"type": "string"}
    if fmt.get("type") == "grammar" and fmt.get("syntax") == "regex":
        pattern = str(fmt.get("definition", ""))
        value["pattern"] = f"^({pattern.removeprefix('^').removesuffix('$')})$"
    elif fmt.get("type") == "grammar":
        log.info("custom tool %r: %s grammars are not enforced", name, fmt.get("syntax"))
    parameters = {
        "type": "object",
        "properties": {"input": value},
        "required": ["input"],
        "additionalProperties": False,
    }
    return FunctionSpec(
        name=name, description=tool.get("description"), parameters=parameters, strict=True
    )


def enforceable(engine: Engine, schema: Mapping[str, Any]) -> bool:
    """Whether the engine would enforce all of `schema` (for tools whose schema respond
    does not own, such as an MCP server's: strict when it can be, else not)."""
    try:
        engine.check_schema(schema)
    except UnsupportedSchemaError:
        return False
    return True


def _check_schema(engine: Engine, schema: Mapping[str, Any], param: str, what: str) -> None:
    try:
        engine.check_schema(schema)
    except UnsupportedSchemaError as exc:
        raise APIError(
            400,
            f"Invalid schema for {what}: the keyword '{exc.keyword}' (at {exc.where}) is not "
            "supported by this model's constrained decoding, so it would not be enforced. "
            "Remove it, or set strict to false.",
            param=param,
            code="invalid_json_schema",
        ) from exc


def tool_choice(
    body: CreateResponseBody,
    specs: Sequence[FunctionSpec],
    mcp_forced: tuple[str, ...] | None = None,
) -> ToolChoice:
    """The tool_choice as an engine sees it; names must be functions of this request.

    `mcp_forced`: the function names of the hosted tools a {"type": "mcp"} or
    {"type": "file_search"} choice names (resolved by hosted/mcp.py, hosted/file_search.py).
    """
    choice = body.tool_choice
    if choice == "required" and not specs:
        raise APIError(
            400,
            "tool_choice is 'required' but there are no function tools.",
            param="tool_choice",
        )
    if isinstance(choice, str):
        return ToolChoice(mode=choice)
    data = choice if isinstance(choice, dict) else choice.model_dump()
    kind = data.get("type")
    known = {spec.name for spec in specs}
    if kind in ("mcp", "file_search") and mcp_forced:
        return ToolChoice(mode="required", allowed=mcp_forced)
    if kind in ("function", "custom"):
        name = data.get("name")
        _require_function(name, known, "tool_choice.name")
        return ToolChoice(mode="required", allowed=(str(name),))
    if kind == "allowed_tools":
        mode = data.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise APIError(400, "mode must be 'auto' or 'required'.", param="tool_choice.mode")
        allowed: list[str] = []
        for index, tool in enumerate(data.get("tools") or []):
            where = f"tool_choice.tools[{index}]"
            if not isinstance(tool, dict) or tool.get("type") not in ("function", "custom"):
                _cannot_force(tool.get("type") if isinstance(tool, dict) else None, where)
            _require_function(tool.get("name"), known, f"{where}.name")
            allowed.append(str(tool["name"]))
        return ToolChoice(mode=mode, allowed=tuple(allowed))
    _cannot_force(kind, "tool_choice")
    raise AssertionError("unreachable")


def _require_function(name: Any, known: set[str], param: str) -> None:
    if not isinstance(name, str) or name not in known:
        raise APIError(
            400,
            f"Tool choice '{name}' is not a function in 'tools'.",
            param=param,
            code="invalid_value",
        )


def _cannot_force(kind: Any, param: str) -> None:
    raise APIError(
        400,
        f"tool_choice cannot force a '{kind}' tool: respond does not run that tool type. "
        "Use a function tool, or tool_choice 'auto'.",
        param=param,
        code="unsupported_tool_choice",
    )


def text_constraint(
    body: CreateResponseBody, engine: Engine
) -> tuple[Mapping[str, Any] | None, bool]:
    """(json_schema, json_object) for the engine, from text.format."""
    fmt = body.text.format
    if isinstance(fmt, TextFormatJsonObject):
        return None, True
    if not isinstance(fmt, TextFormatJsonSchema):
        return None, False
    if fmt.strict is False:
        try:
            engine.check_schema(fmt.schema_)
        except UnsupportedSchemaError:
            return None, True  # not strict: any JSON object is what was promised
        return fmt.schema_, False
    _check_schema(engine, fmt.schema_, "text.format.schema", f"format '{fmt.name}'")
    return fmt.schema_, False


def check_call_ids(items: Sequence[InputItem], *, new_from: int = 0) -> None:
    """Every function_call_output answers a function_call that is in the context.

    Run on the final item list (stored history, then the request's input from index
    `new_from`), after previous_response_id / conversation expansion.
    """
    calls: set[str] = set()
    for index, item in enumerate(items):
        if isinstance(item, FunctionCallInput | CustomToolCallInput):
            calls.add(item.call_id)
        elif (
            isinstance(item, FunctionCallOutputInput | CustomToolCallOutputInput)
            and item.call_id not in calls
        ):
            raise APIError(
                400,
                f"No tool call found for function call output with call_id '{item.call_id}'.",
                param=f"input[{index - new_from}].call_id",
                code="invalid_value",
            )
