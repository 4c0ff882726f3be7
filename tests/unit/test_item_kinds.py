"""The item-kind registry and the typed request tools, without a server or a model."""

from __future__ import annotations

import inspect

import pytest
from openai.types.responses import Response, ResponseFunctionShellToolCall
from pydantic import ValidationError

from respond.engines import _base as d
from respond.protocol.errors import from_validation_error
from respond.protocol.requests import (
    CreateResponseBody,
    FunctionCallInput,
    InputItem,
    InputMessage,
)
from respond.protocol.resource import ResponseResource
from respond.protocol.tools import CustomTool, FunctionTool, McpTool, OtherTool, WebSearchTool
from respond.responses import events
from respond.responses.context import items_to_messages
from respond.responses.events import EventBuilder
from respond.responses.kinds import KINDS, Kinds, calls_for, echo, shown
from respond.responses.kinds.namespace import Names, described
from respond.responses.tools import function_specs, tool_choice
from respond.testing import ScriptedEngine


def test_tools_parse_once_into_their_classes() -> None:
    body = CreateResponseBody.model_validate(
        {
            "tools": [
                {"type": "function", "name": "f"},
                {"type": "custom", "name": "c", "format": {"type": "text"}},
                {"type": "mcp", "server_label": "s"},
                {"type": "web_search"},
                {"type": "web_search_preview_2025_03_11"},
                {"type": "image_generation"},
            ]
        }
    )
    assert [type(tool) for tool in body.tools] == [
        FunctionTool,
        CustomTool,
        McpTool,
        WebSearchTool,
        WebSearchTool,
        OtherTool,
    ]


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"name": "f"}, "tools[0]"),
        ({"type": "function", "name": "a b"}, "tools[0].name"),
        ({"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "x"}}, None),
    ],
)
def test_a_malformed_tool_is_refused_naming_it(tool: dict[str, object], param: str | None) -> None:
    data = {"tools": [tool]}
    with pytest.raises(ValidationError) as caught:
        CreateResponseBody.model_validate(data)
    error = from_validation_error(caught.value, data)
    assert error.status == 400
    assert error.param is not None and error.param.startswith(param or "tools[0].format")


def test_each_tool_is_echoed_by_its_kind() -> None:
    function = FunctionTool(type="function", name="f")
    assert echo(function) == {
        "type": "function",
        "name": "f",
        "description": None,
        "parameters": None,
        "strict": True,
    }
    assert echo(OtherTool(type="image_generation")) is None


def test_a_call_opens_the_item_of_its_tools_kind() -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls_for([CustomTool(type="custom", name="c")])))
    b.start()
    for name in ("c", "f"):
        b.push(d.ToolCallStart(call_id=f"call_{name}", name=name))
        b.push(d.ToolCallArgumentsDelta('{"input": "x"}'))
        b.push(d.ToolCallEnd())
    b.finish()
    assert [item.type for item in b.response.output] == ["custom_tool_call", "function_call"]


def test_the_builder_knows_no_kind_by_name() -> None:
    source = inspect.getsource(events)
    for kind in KINDS:
        assert f'"{kind.item_type}"' not in source, kind.item_type


def test_calls_replay_into_one_assistant_turn() -> None:
    items: list[InputItem] = [
        InputMessage(role="user", content="go"),
        FunctionCallInput(type="function_call", call_id="a", name="f", arguments="{}"),
        FunctionCallInput(type="function_call", call_id="b", name="g", arguments="{}"),
    ]
    messages = items_to_messages(items, vision=False)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert [call.name for call in messages[1].tool_calls] == ["f", "g"]


def namespaces() -> CreateResponseBody:
    member = {"type": "function", "name": "search", "parameters": {"type": "object"}}
    return CreateResponseBody.model_validate(
        {
            "tools": [
                {"type": "namespace", "name": "docs", "description": "d", "tools": [member]},
                {"type": "namespace", "name": "mail", "description": "m", "tools": [member]},
                {"type": "function", "name": "other"},
            ]
        }
    )


def test_two_namespaces_may_share_a_member_name() -> None:
    body = namespaces()
    names = Names(body.tools)
    assert [m.visible for m in names.members] == ["docs__search", "mail__search"]
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    b = EventBuilder(response, kinds=Kinds(calls_for(body.tools)))
    b.start()
    for visible in ("mail__search", "other"):
        b.push(d.ToolCallStart(call_id=f"call_{visible}", name=visible))
        b.push(d.ToolCallArgumentsDelta("{}"))
        b.push(d.ToolCallEnd())
    b.finish()
    first, second = (item.model_dump(exclude_none=True) for item in b.response.output)
    assert (first["name"], first["namespace"]) == ("search", "mail")
    assert second["name"] == "other" and "namespace" not in second
    # Replayed, the call is the one the model made: under its visible name.
    call = FunctionCallInput(
        type="function_call", call_id="c", name="search", namespace="mail", arguments="{}"
    )
    (message,) = items_to_messages([call], vision=False, namespaced=names.visible)
    assert message.tool_calls[0].name == "mail__search"


def test_a_member_names_its_namespace_and_the_namespace_is_described_once() -> None:
    """Chat templates list functions, not groups: each member says which namespace it is
    part of, and what each namespace is for is told once, for the system prompt (an MCP
    server's instructions, which Codex sends as the description, would not fit per member)."""
    find = {"type": "function", "name": "find", "description": "Find a mail."}
    mail = {"type": "namespace", "name": "mail", "description": "The mailbox.\n", "tools": [find]}
    docs = {"type": "namespace", "name": "docs", "tools": [{"type": "custom", "name": "send"}]}
    body = CreateResponseBody.model_validate(
        {"tools": [mail, docs, {"type": "function", "name": "f"}]}
    )
    specs = function_specs(body, ScriptedEngine([]))
    assert [(spec.name, spec.description) for spec in specs] == [
        ("f", None),
        ("find", "Find a mail.\n\nPart of mail."),
        ("send", "Part of docs."),
    ]
    assert described(body.tools) == (
        "Tool namespaces (each tool's description names the one it is part of):\n"
        "- mail: The mailbox."
    )
    assert described([FunctionTool(type="function", name="f", description="x")]) is None


def test_tool_choice_names_a_member_with_its_namespace() -> None:
    body = namespaces()
    specs = [
        d.FunctionSpec(name=n, description=None, parameters={})
        for n in ("docs__search", "mail__search", "other")
    ]
    body.tool_choice = {"type": "function", "name": "search", "namespace": "docs"}
    assert tool_choice(body, specs).allowed == ("docs__search",)
    body.tool_choice = {"type": "allowed_tools", "tools": [{"type": "function", "name": "other"}]}
    assert tool_choice(body, specs).allowed == ("other",)


def test_only_client_tools_can_be_required() -> None:
    body = CreateResponseBody.model_validate(
        {"tools": [{"type": "shell"}, {"type": "apply_patch"}], "tool_choice": "required"}
    )
    specs = [seen.spec for tool in body.tools if (seen := shown(tool)) is not None]
    assert [spec.name for spec in specs] == ["shell", "apply_patch"]
    assert tool_choice(body, specs).mode == "required"
    body.tool_choice = {"type": "apply_patch"}
    assert tool_choice(body, specs).allowed == ("apply_patch",)


def test_a_shell_call_is_added_and_done_once_complete() -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    tools = CreateResponseBody.model_validate({"tools": [{"type": "shell"}]}).tools
    b = EventBuilder(response, kinds=Kinds(calls_for(tools)))
    events = b.start() + b.push(d.ToolCallStart(call_id="call_1", name="shell"))
    events += b.push(d.ToolCallArgumentsDelta('{"commands": ["ls"]}')) + b.push(d.ToolCallEnd())
    events += b.finish()
    assert [e.type for e in events][2:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    final = Response.model_validate(b.response.model_dump(mode="json"))
    (call,) = final.output
    assert isinstance(call, ResponseFunctionShellToolCall)
    assert call.action.commands == ["ls"] and call.status == "completed"


def test_a_shell_call_cut_short_leaves_no_item() -> None:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    tools = CreateResponseBody.model_validate({"tools": [{"type": "shell"}]}).tools
    b = EventBuilder(response, kinds=Kinds(calls_for(tools)))
    b.start()
    b.push(d.ToolCallStart(call_id="call_1", name="shell"))
    b.push(d.ToolCallArgumentsDelta('{"comm'))
    b.push(d.Finish("length"))
    b.finish()
    assert b.response.output == [] and b.response.status == "incomplete"


def test_a_tool_type_respond_does_not_run_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    body = CreateResponseBody.model_validate({"tools": [{"type": "unrun_in_this_test"}]})
    with caplog.at_level("INFO", logger="respond.tools"):
        for _ in range(3):
            assert function_specs(body, ScriptedEngine([])) == []
    logged = [r for r in caplog.records if "unrun_in_this_test" in r.getMessage()]
    assert len(logged) == 1
