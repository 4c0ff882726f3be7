"""The tools a request gives (`tools: [...]`): one class per tool type, parsed at the door.

A discriminated union on `type`, so the run dispatches once, by class. The fields respond
checks with its own messages (an MCP server's label and URL, a file_search's stores) are
kept loose here and checked where the tool is resolved (responses/hosted/). Tool types
respond does not run (image_generation, ...) parse as `OtherTool`: accepted,
logged, never shown to the model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from respond.protocol._base import WireIn

__all__ = [
    "ApplyPatchTool",
    "ComputerTool",
    "CodeInterpreterTool",
    "ComputerUsePreviewTool",
    "ToolSearchTool",
    "WebSearchTool",
    "LocalShellTool",
    "ShellTool",
    "CustomTool",
    "CustomToolGrammar",
    "CustomToolText",
    "FileSearchTool",
    "FunctionTool",
    "McpTool",
    "NamespaceTool",
    "OtherTool",
    "Tool",
]

_NAME = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")


class FunctionTool(WireIn):
    type: Literal["function"]
    name: str = _NAME
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    # Not shown to the model until a tool search loads it (responses/deferred.py).
    defer_loading: bool | None = None


class CustomToolText(WireIn):
    type: Literal["text"]


class CustomToolGrammar(WireIn):
    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str


class CustomTool(WireIn):
    """A tool whose input is free text (optionally a grammar's language), not JSON."""

    type: Literal["custom"]
    name: str = _NAME
    description: str | None = None
    format: Annotated[CustomToolText | CustomToolGrammar, Field(discriminator="type")] | None = None
    defer_loading: bool | None = None  # as a function tool's


class NamespaceTool(WireIn):
    """Function and custom tools grouped under a name (Codex sends its MCP tools so): the
    model sees the members, calls name the member and carry the `namespace`."""

    type: Literal["namespace"]
    name: str = _NAME
    description: str | None = None
    tools: list[Annotated[FunctionTool | CustomTool, Field(discriminator="type")]] = Field(
        min_length=1
    )


class McpTool(WireIn):
    """A remote MCP server (responses/hosted/mcp.py checks and resolves its fields)."""

    type: Literal["mcp"]
    server_label: Any = None
    server_url: Any = None
    connector_id: Any = None
    server_description: Any = None
    headers: Any = None
    authorization: Any = None
    require_approval: Any = None
    allowed_tools: Any = None
    defer_loading: bool | None = None  # shown once a tool search loads its tools


class FileSearchTool(WireIn):
    """A search of vector stores (responses/hosted/file_search.py checks its fields)."""

    type: Literal["file_search"]
    vector_store_ids: Any = None
    max_num_results: Any = 10
    filters: Any = None
    ranking_options: Any = None


class CodeInterpreterTool(WireIn):
    """Python run by respond in a sandboxed container (responses/hosted/code_interpreter.py
    checks `container`: a container id, or {"type": "auto", "file_ids": [...]})."""

    type: Literal["code_interpreter"]
    container: Any = None


class WebSearchTool(WireIn):
    """A web search respond runs through the operator's search provider (`web_search`, or
    the older `web_search_preview`); responses/hosted/web_search.py checks its fields."""

    type: Literal[
        "web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"
    ]
    filters: Any = None  # {"allowed_domains": [...]}
    search_context_size: Any = None  # low, medium (the default) or high
    user_location: Any = None  # {"type": "approximate", "country", "city", ...}
    external_web_access: Any = None  # false: search only, no page is fetched


class ShellTool(WireIn):
    """Shell commands the client runs (OpenAI's `shell`): calls are `shell_call` items."""

    type: Literal["shell"]
    environment: Any = None


class LocalShellTool(WireIn):
    """The older local shell (`local_shell`): calls are `local_shell_call` items."""

    type: Literal["local_shell"]


class ApplyPatchTool(WireIn):
    """File edits the client applies (`apply_patch`): calls are `apply_patch_call` items."""

    type: Literal["apply_patch"]


class ComputerUsePreviewTool(WireIn):
    """A screen the client drives (`computer_use_preview`): calls are `computer_call` items
    with one action each."""

    type: Literal["computer_use_preview"]
    display_width: int = Field(ge=1)
    display_height: int = Field(ge=1)
    environment: Literal["windows", "mac", "linux", "ubuntu", "browser"]


class ComputerTool(WireIn):
    """A screen the client drives (`computer`, the GA tool): calls are `computer_call`
    items with a batch of `actions` each."""

    type: Literal["computer"]


class ToolSearchTool(WireIn):
    """A search of the request's `defer_loading` tools (`tool_search`): respond runs it
    (execution "server", the default), or the client does ("client"); its calls are
    `tool_search_call` items, its results `tool_search_output` items."""

    type: Literal["tool_search"]
    execution: Literal["server", "client"] | None = None
    description: str | None = None  # for a client-executed search
    parameters: dict[str, Any] | None = None  # for a client-executed search


class OtherTool(WireIn):
    """A tool type respond does not run (image_generation, ...)."""

    type: str


_KNOWN = {
    "function",
    "custom",
    "namespace",
    "mcp",
    "file_search",
    "code_interpreter",
    "shell",
    "local_shell",
    "apply_patch",
    "computer_use_preview",
    "computer",
    "tool_search",
}
# The dated spellings of web_search and web_search_preview: one tool class.
WEB_SEARCH_TYPES = frozenset(
    {"web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"}
)


def _tool_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None
    if kind in WEB_SEARCH_TYPES:
        return "web_search"
    return kind if kind in _KNOWN else "other"


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[CustomTool, Tag("custom")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[McpTool, Tag("mcp")]
    | Annotated[FileSearchTool, Tag("file_search")]
    | Annotated[CodeInterpreterTool, Tag("code_interpreter")]
    | Annotated[ShellTool, Tag("shell")]
    | Annotated[LocalShellTool, Tag("local_shell")]
    | Annotated[ApplyPatchTool, Tag("apply_patch")]
    | Annotated[ComputerUsePreviewTool, Tag("computer_use_preview")]
    | Annotated[ComputerTool, Tag("computer")]
    | Annotated[ToolSearchTool, Tag("tool_search")]
    | Annotated[WebSearchTool, Tag("web_search")]
    | Annotated[OtherTool, Tag("other")],
    Discriminator(
        _tool_tag,
        custom_error_type="invalid_tool_type",
        custom_error_message="Each tool needs a 'type' (a string)",
    ),
]
