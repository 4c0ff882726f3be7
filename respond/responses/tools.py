"""Request-side rules for tools, tool_choice and structured outputs.

Everything here raises APIError (400, naming the param) before anything is streamed:
bad tool definitions, a tool_choice naming a tool that is not there or that respond
cannot run, schemas the engine could not enforce, tool results for unknown calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines._base import Engine, FunctionSpec, ToolChoice, UnsupportedSchemaError
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    ApplyPatchCallInput,
    ApplyPatchCallOutputInput,
    ComputerCallInput,
    ComputerCallOutputInput,
    CreateResponseBody,
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputItem,
    LocalShellCallInput,
    LocalShellCallOutputInput,
    ShellCallInput,
    ShellCallOutputInput,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    ToolSearchCallInput,
    ToolSearchOutputInput,
)
from respond.protocol.tools import WEB_SEARCH_TYPES, FunctionTool, OtherTool
from respond.responses.hosted_call import HostedTool
from respond.responses.kinds import shown
from respond.responses.kinds.custom_tool_call import shown as custom_shown
from respond.responses.kinds.namespace import Member, Names

__all__ = [
    "check_call_ids",
    "enforceable",
    "function_specs",
    "text_constraint",
    "tool_choice",
]

log = logging.getLogger("respond.tools")

_UNRUN_LOGGED: set[str] = set()  # the tool types respond does not run, logged once each


def function_specs(body: CreateResponseBody, engine: Engine) -> list[FunctionSpec]:
    """The function and custom tools the model may call, validated. Hosted tools (mcp,
    file_search) are added by their families (hosted/); other tool types (such as
    web_search, which respond does not run) are left out and logged."""
    specs: list[FunctionSpec] = []
    for index, tool in enumerate(body.tools):
        where = f"tools[{index}]"
        if isinstance(tool, FunctionTool):
            specs.append(_function_spec(tool, where, engine))
        elif (seen := shown(tool)) is not None:
            specs.append(seen.spec)  # custom, shell, apply_patch, ...: as their kind shows them
        elif isinstance(tool, OtherTool) and tool.type not in _UNRUN_LOGGED:
            # Once per process: Codex sends web_search with every request.
            _UNRUN_LOGGED.add(tool.type)
            log.info("tool type %r is not run by respond; the model does not see it", tool.type)
    for member in Names(body.tools).members:
        specs.append(_member_spec(member, engine))
    names = [spec.name for spec in specs]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise APIError(400, f"Duplicate function name '{name}'.", param=f"tools[{index}].name")
    return specs


def _member_spec(member: Member, engine: Engine) -> FunctionSpec:
    """A namespace's tool, shown as a function under its visible name, its description
    naming its namespace."""
    update = {"name": member.visible, "description": member.description}
    tool = member.tool.model_copy(update=update)
    if isinstance(tool, FunctionTool):
        return _function_spec(tool, member.where, engine)
    return custom_shown(tool).spec


def _function_spec(tool: FunctionTool, where: str, engine: Engine) -> FunctionSpec:
    parameters = tool.parameters or {"type": "object", "properties": {}}
    if parameters.get("type", "object") != "object":
        raise APIError(
            400,
            f"Invalid schema for function '{tool.name}': the parameters must be a JSON "
            "Schema of type 'object'.",
            param=f"{where}.parameters",
            code="invalid_function_parameters",
        )
    strict = True if tool.strict is None else tool.strict
    if strict:
        _check_schema(engine, parameters, f"{where}.parameters", f"function '{tool.name}'")
    return FunctionSpec(
        name=tool.name, description=tool.description, parameters=parameters, strict=strict
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
    hosted_forced: tuple[str, ...] | None = None,
    hosted: Mapping[str, HostedTool] | None = None,
) -> ToolChoice:
    """The tool_choice as an engine sees it; names must be functions of this request.

    `hosted_forced`: the function names of the hosted tools a choice of a hosted family's
    type names ({"type": "mcp"}, {"type": "file_search"}, {"type": "web_search"}, ...),
    resolved by that family (hosted/). `hosted`: the run's hosted tools by the name the
    model sees, which an allowed_tools list names by their type.
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
    # {"type": "shell"}, {"type": "apply_patch"}: a tool its kind shows, forced by its type.
    by_type = _chosen_by_type(body)
    if hosted_forced:
        return ToolChoice(mode="required", allowed=hosted_forced)
    if isinstance(kind, str) and kind in by_type:
        return ToolChoice(mode="required", allowed=(by_type[kind],))
    names = Names(body.tools)
    if kind in ("function", "custom"):
        name = names.chosen(data.get("name"), data.get("namespace"))
        _require_function(name, known, "tool_choice.name")
        return ToolChoice(mode="required", allowed=(str(name),))
    if kind == "allowed_tools":
        mode = data.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise APIError(400, "mode must be 'auto' or 'required'.", param="tool_choice.mode")
        allowed: list[str] = []
        for index, tool in enumerate(data.get("tools") or []):
            where = f"tool_choice.tools[{index}]"
            if isinstance(tool, dict) and tool.get("type") in by_type:
                allowed.append(by_type[tool["type"]])
                continue
            if isinstance(tool, dict) and tool.get("type") in _HOSTED_TYPES:
                allowed += _hosted_allowed(tool, hosted or {}, where)
                continue
            if not isinstance(tool, dict) or tool.get("type") not in ("function", "custom"):
                _cannot_force(tool.get("type") if isinstance(tool, dict) else None, where)
            name = names.chosen(tool.get("name"), tool.get("namespace"))
            _require_function(name, known, f"{where}.name")
            allowed.append(str(name))
        return ToolChoice(mode=mode, allowed=tuple(allowed))
    _cannot_force(kind, "tool_choice")
    raise AssertionError("unreachable")


# allowed_tools entry type -> the hosted family whose tools it names.
_HOSTED_TYPES = {
    **dict.fromkeys(WEB_SEARCH_TYPES, "web_search"),
    **{family: family for family in ("mcp", "file_search", "code_interpreter", "shell")},
    "tool_search": "tool_search",
}


def _hosted_allowed(
    entry: Mapping[str, Any], hosted: Mapping[str, HostedTool], where: str
) -> list[str]:
    """The names the model sees for the hosted tools an allowed_tools entry names: all of
    its family's (an MCP server's by server_label, one of its tools when `name` is given);
    none is a 400."""
    kind = entry["type"]
    family = _HOSTED_TYPES[kind]
    label, name = entry.get("server_label"), entry.get("name")
    if family == "mcp" and not isinstance(label, str):
        raise APIError(
            400,
            "An mcp entry of allowed_tools needs the server_label of an mcp tool.",
            param=f"{where}.server_label",
            code="missing_required_parameter",
        )
    named = [
        tool.visible
        for tool in hosted.values()
        if tool.family == family
        and (family != "mcp" or (tool.server_label == label and name in (None, tool.name)))
    ]
    if not named:
        what = f"the MCP server '{label}'" + (f" (tool '{name}')" if name else "")
        what = what if family == "mcp" else f"a '{kind}' tool"
        raise APIError(
            400,
            f"tool_choice.tools names {what}, which is not among this request's tools "
            "respond runs.",
            param=where,
            code="invalid_value",
        )
    return named


def _chosen_by_type(body: CreateResponseBody) -> dict[str, str]:
    """tool_choice types that name a request tool (`shell`) -> the function the model sees."""
    found = {}
    for tool in body.tools:
        seen = shown(tool)
        if seen is not None and seen.choice is not None:
            found[seen.choice] = seen.spec.name
    return found


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
        if isinstance(item, _CALLS) and item.call_id is not None:
            calls.add(item.call_id)
        elif isinstance(item, _OUTPUTS) and _answered(item) not in (None, *calls):
            raise APIError(
                400,
                f"No tool call found for function call output with call_id '{_answered(item)}'.",
                param=f"input[{index - new_from}].call_id",
                code="invalid_value",
            )


# Input items that are calls the client answers, and the outputs that answer them.
_CALLS = (
    FunctionCallInput,
    CustomToolCallInput,
    ShellCallInput,
    LocalShellCallInput,
    ApplyPatchCallInput,
    ComputerCallInput,
    ToolSearchCallInput,
)
_OUTPUTS = (
    FunctionCallOutputInput,
    CustomToolCallOutputInput,
    ShellCallOutputInput,
    LocalShellCallOutputInput,
    ApplyPatchCallOutputInput,
    ComputerCallOutputInput,
    ToolSearchOutputInput,
)


def _answered(
    item: FunctionCallOutputInput
    | CustomToolCallOutputInput
    | ShellCallOutputInput
    | LocalShellCallOutputInput
    | ApplyPatchCallOutputInput
    | ComputerCallOutputInput
    | ToolSearchOutputInput,
) -> str | None:
    """The call_id an output answers (a local_shell_call_output names it as its `id`; a
    tool search respond ran answers none)."""
    return item.id if isinstance(item, LocalShellCallOutputInput) else item.call_id
