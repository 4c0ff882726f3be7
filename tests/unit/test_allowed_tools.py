"""tool_choice {"type": "allowed_tools"} naming hosted tools by their type: each entry
keeps its family's tools for the model (an MCP server's by server_label), the request's
other tools are left out, and an entry naming no tool of the request is a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest

from respond.engines import _base as d
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.responses.hosted_call import HostedTool
from respond.responses.tools import tool_choice


def hosted(visible: str, family: str, server_label: str = "", name: str = "") -> HostedTool:
    return HostedTool(
        visible=visible,
        server_label=server_label or family,
        name=name or visible,
        description=None,
        parameters={"type": "object"},
        needs_approval=False,
        executor=None,  # type: ignore[arg-type]  # never called here
        family=family,
    )


HOSTED = {
    tool.visible: tool
    for tool in (
        hosted("web_search", "web_search"),
        hosted("open_page", "web_search"),
        hosted("file_search", "file_search"),
        hosted("python", "code_interpreter"),
        hosted("container_shell", "shell"),
        hosted("ask_question", "mcp", "deepwiki", "ask_question"),
        hosted("read_wiki", "mcp", "deepwiki", "read_wiki"),
        hosted("create_issue", "mcp", "github", "create_issue"),
    )
}
SPECS = [d.FunctionSpec(name=name, description=None, parameters={}) for name in ("lookup", *HOSTED)]


def choose(*entries: dict[str, Any], mode: str = "auto") -> d.ToolChoice:
    body = CreateResponseBody.model_validate(
        {
            "tools": [{"type": "function", "name": "lookup"}],
            "tool_choice": {"type": "allowed_tools", "mode": mode, "tools": list(entries)},
        }
    )
    return tool_choice(body, SPECS, None, HOSTED)


@pytest.mark.parametrize(
    ("entry", "allowed"),
    [
        ({"type": "web_search"}, ("web_search", "open_page")),
        ({"type": "web_search_preview"}, ("web_search", "open_page")),
        ({"type": "file_search"}, ("file_search",)),
        ({"type": "code_interpreter"}, ("python",)),
        ({"type": "shell"}, ("container_shell",)),
        ({"type": "mcp", "server_label": "deepwiki"}, ("ask_question", "read_wiki")),
        ({"type": "mcp", "server_label": "deepwiki", "name": "read_wiki"}, ("read_wiki",)),
    ],
)
def test_a_hosted_type_keeps_its_family_s_tools(
    entry: dict[str, Any], allowed: tuple[str, ...]
) -> None:
    assert choose(entry) == d.ToolChoice(mode="auto", allowed=allowed)


def test_hosted_and_function_entries_together_and_required() -> None:
    chosen = choose(
        {"type": "function", "name": "lookup"},
        {"type": "mcp", "server_label": "github"},
        {"type": "code_interpreter"},
        mode="required",
    )
    assert chosen == d.ToolChoice(mode="required", allowed=("lookup", "create_issue", "python"))


@pytest.mark.parametrize(
    ("entries", "param"),
    [
        ([{"type": "mcp", "server_label": "nowhere"}], "tool_choice.tools[0]"),
        ([{"type": "mcp"}], "tool_choice.tools[0].server_label"),
        ([{"type": "web_search"}, {"type": "tool_search"}], "tool_choice.tools[1]"),
        ([{"type": "mcp", "server_label": "github", "name": "merge"}], "tool_choice.tools[0]"),
        ([{"type": "function", "name": "absent"}], "tool_choice.tools[0].name"),
        ([{"type": "image_generation"}], "tool_choice.tools[0]"),
    ],
)
def test_an_entry_naming_no_tool_of_the_request_is_a_400(
    entries: list[dict[str, Any]], param: str
) -> None:
    with pytest.raises(APIError) as refused:
        choose(*entries)
    assert refused.value.status == 400 and refused.value.param == param
