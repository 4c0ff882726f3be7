"""Validate bodies and events against the Open Responses OpenAPI document (tests/support/spec).

The reasoning text events respond streams by default carry OpenAI's names
(response.reasoning_text.*), which that document lacks: those are validated against the
openai SDK's own event types instead (strictly: no field may be missing or mistyped).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from openai.types.responses import (
    ResponseOutputItem,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseStreamEvent,
    Tool,
    ToolChoiceMcp,
    ToolChoiceShell,
    ToolChoiceTypes,
)
from openai.types.responses.response_output_text import (
    AnnotationContainerFileCitation,
    AnnotationFileCitation,
)
from pydantic import BaseModel, TypeAdapter
from referencing import Registry, Resource

SPEC_PATH = Path(__file__).with_name("spec") / "openresponses-openapi.json"
BASE = "https://openresponses.invalid/openapi.json"


@functools.cache
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(SPEC_PATH.read_text())
    spec = copy.deepcopy(spec)
    # Known defect of the document: JsonSchemaResponseFormat.schema is typed {"type": "null"},
    # which rejects any response echoing a real JSON schema. Accept any object there.
    fmt = spec["components"]["schemas"]["JsonSchemaResponseFormat"]
    fmt["properties"]["schema"] = {"type": "object"}
    return spec


@functools.cache
def _registry() -> Registry[Any]:
    resource = Resource.from_contents(_spec(), default_specification=_draft())
    registry: Registry[Any] = Registry().with_resource(BASE, resource)
    return registry


def _draft() -> Any:
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"{BASE}#/components/schemas/{name}"}, registry=_registry()
    )


@functools.cache
def _event_schemas() -> dict[str, str]:
    out = {}
    for name, schema in _spec()["components"]["schemas"].items():
        if name.endswith("StreamingEvent"):
            out[schema["properties"]["type"]["enum"][0]] = name
    return out


def validate(instance: Any, schema_name: str) -> None:
    errors = sorted(_validator(schema_name).iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"{schema_name} does not validate: {details}")


# MCP, file_search, code_interpreter, tool_search, web_search, shell and computer items,
# events, tools and tool_choice, file_citation / container_file_citation annotations and
# the compaction progress event are OpenAI's Responses shapes, absent from the Open
# Responses document: they are checked against the openai SDK's types (required fields
# and their types), everything around them against the spec.
MCP_ITEMS = frozenset(
    {
        "mcp_list_tools",
        "mcp_call",
        "mcp_approval_request",
        "file_search_call",
        "code_interpreter_call",
        "tool_search_call",
        "tool_search_output",
        "computer_call",
        "web_search_call",
        "shell_call",
        "shell_call_output",
    }
)
WEB_SEARCH = frozenset(
    {"web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"}
)
HOSTED_TOOLS = frozenset(
    {
        "mcp",
        "file_search",
        "code_interpreter",
        "tool_search",
        "computer_use_preview",
        "shell",
        *WEB_SEARCH,
    }
)
_CITATIONS: dict[str, type[BaseModel]] = {
    "file_citation": AnnotationFileCitation,
    "container_file_citation": AnnotationContainerFileCitation,
}
_SDK_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
_SDK_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
_SDK_TOOL: TypeAdapter[Any] = TypeAdapter(Tool)


def _without_mcp(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its MCP items, tools and tool_choice checked by the SDK and set aside."""
    output = []
    for item in body.get("output") or []:
        if item.get("type") in MCP_ITEMS:
            _SDK_ITEM.validate_python(item)
        else:
            output.append(_without_file_citations(item))
    tools = []
    for tool in body.get("tools") or []:
        if tool.get("type") in HOSTED_TOOLS:
            _SDK_TOOL.validate_python(tool)
        else:
            tools.append(tool)
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "mcp":
        ToolChoiceMcp.model_validate(choice)
        choice = "required"
    if isinstance(choice, dict) and choice.get("type") in ("file_search", "code_interpreter"):
        ToolChoiceTypes.model_validate(choice)
        choice = "required"
    if isinstance(choice, dict) and choice.get("type") == "shell":
        ToolChoiceShell.model_validate(choice)
        choice = "required"
    if isinstance(choice, dict) and choice.get("type") in WEB_SEARCH:
        choice = "required"  # the SDK's ToolChoiceTypes names web_search_preview only
    return {**body, "output": output, "tools": tools, "tool_choice": choice}


def _without_file_citations(item: dict[str, Any]) -> dict[str, Any]:
    """A message whose file and container file citations are checked by the SDK and set
    aside."""
    if item.get("type") != "message":
        return item
    content = []
    for part in item.get("content") or []:
        notes = part.get("annotations") if isinstance(part, dict) else None
        if notes:
            kept = [a for a in notes if a.get("type") not in _CITATIONS]
            for note in notes:
                if note.get("type") in _CITATIONS:
                    _CITATIONS[note["type"]].model_validate(note, strict=True)
            part = {**part, "annotations": kept}
        content.append(part)
    return {**item, "content": content}


def validate_response(body: dict[str, Any]) -> None:
    validate(_without_mcp(body), "ResponseResource")


_OPENAI_EVENTS: dict[str, type[BaseModel]] = {
    "response.reasoning_text.delta": ResponseReasoningTextDeltaEvent,
    "response.reasoning_text.done": ResponseReasoningTextDoneEvent,
}


def validate_openai_event(event: dict[str, Any]) -> None:
    """An event in OpenAI's naming, checked against the openai SDK's type for it."""
    model = _OPENAI_EVENTS[str(event.get("type"))]
    parsed = model.model_validate(event, strict=True)
    assert parsed.model_dump(exclude_unset=True) == event, (event, parsed)


def validate_event(event: dict[str, Any]) -> None:
    kind = str(event.get("type"))
    if kind.startswith(
        (
            "response.mcp_list_tools.",
            "response.mcp_call",
            "response.file_search_call.",
            "response.compaction.",  # OpenAI's progress of a compaction
            "response.code_interpreter_call",
            "response.web_search_call.",
        )
    ):
        _SDK_EVENT.validate_python(event)
        return
    if isinstance(event.get("item"), dict) and event["item"].get("type") in MCP_ITEMS:
        _SDK_EVENT.validate_python(event)
        return
    note = event.get("annotation")
    if isinstance(note, dict) and note.get("type") in _CITATIONS:
        # The spec's annotations are url_citation only: a file citation's event is the SDK's.
        _CITATIONS[note["type"]].model_validate(note, strict=True)
        _SDK_EVENT.validate_python(event)
        return
    if isinstance(event.get("response"), dict):
        event = {**event, "response": _without_mcp(event["response"])}
    if isinstance(event.get("item"), dict):
        event = {**event, "item": _without_file_citations(event["item"])}
    if isinstance(event.get("part"), dict):
        message = _without_file_citations({"type": "message", "content": [event["part"]]})
        event = {**event, "part": message["content"][0]}
    if kind in _OPENAI_EVENTS:
        validate_openai_event(event)
        return
    name = _event_schemas().get(str(kind))
    assert name is not None, f"event type {kind!r} is not an Open Responses streaming event"
    validate(event, name)
