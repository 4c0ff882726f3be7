"""`namespace` tools: function and custom tools grouped under a name (Codex sends its MCP
and app tools so). They are flattened only inside the engine: each member is shown to the
model as a function under a name unique in the request (its own name, or
`namespace__name` where two would clash), its description ending `Part of NAME.`. What
each namespace is for is told once, in the system prompt: chat templates list functions,
not groups, and Codex sends an MCP server's instructions (often kilobytes) as its
namespace's description, too long to repeat in every member. Its calls are the member's
own items (`function_call`, `custom_tool_call`) naming the member and carrying the
`namespace`, and replay under the same visible name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from respond.engines import _base as d
from respond.protocol.tools import CustomTool, FunctionTool, NamespaceTool, Tool
from respond.responses.hosted_call import visible_names
from respond.responses.kinds._base import Item, Kind
from respond.responses.kinds.custom_tool_call import CustomToolCall
from respond.responses.kinds.function_call import FunctionCall

__all__ = ["KIND", "Member", "Names", "described"]


@dataclass(frozen=True)
class Member:
    """One tool of a namespace, as the model sees it."""

    namespace: str
    tool: FunctionTool | CustomTool
    visible: str  # the function name the model calls
    where: str  # tools[i].tools[j], for errors

    @property
    def description(self) -> str:
        """The member's description as the model reads it: its own, then its namespace."""
        group = f"Part of {self.namespace}."
        return f"{self.tool.description}\n\n{group}" if self.tool.description else group

    @property
    def opens(self) -> Callable[[d.ToolCallStart], Item[Any]]:
        """The item a call of it opens: the member's own, with its namespace."""
        kind = CustomToolCall if isinstance(self.tool, CustomTool) else FunctionCall
        return partial(_opened, kind, self.tool.name, self.namespace)


def _opened(
    kind: type[FunctionCall | CustomToolCall], name: str, namespace: str, start: d.ToolCallStart
) -> Item[Any]:
    return kind(start.call_id, name, namespace)


class Names:
    """The namespace members of one request, and the names the model sees them by."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        groups = [(i, t) for i, t in enumerate(tools) if isinstance(t, NamespaceTool)]
        pairs = [(group.name, member.name) for _, group in groups for member in group.tools]
        taken = [t.name for t in tools if isinstance(t, FunctionTool | CustomTool)]
        names = visible_names(pairs, taken)
        self.members = [
            Member(group.name, member, names[(group.name, member.name)], f"tools[{i}].tools[{j}]")
            for i, group in groups
            for j, member in enumerate(group.tools)
        ]

    def visible(self, namespace: str, name: str) -> str:
        """The name the model sees a member by (also for replayed calls)."""
        for member in self.members:
            if (member.namespace, member.tool.name) == (namespace, name):
                return member.visible
        return name  # a namespace this request no longer has: its call as it was named

    def chosen(self, name: Any, namespace: Any) -> Any:
        """The visible name a tool_choice means: a member named with its namespace, or a
        member name no other tool has; any other name as given."""
        found = [
            member.visible
            for member in self.members
            if member.tool.name == name and namespace in (None, member.namespace)
        ]
        return found[0] if len(found) == 1 or (namespace is not None and found) else name


def described(tools: Sequence[Tool]) -> str | None:
    """What the request's namespaces are for, for the system prompt (None if none says)."""
    lines = [
        f"- {tool.name}: {tool.description.strip()}"
        for tool in tools
        if isinstance(tool, NamespaceTool) and tool.description and tool.description.strip()
    ]
    header = "Tool namespaces (each tool's description names the one it is part of):"
    return "\n".join([header, *lines]) if lines else None


def _echo(tool: NamespaceTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(item_type=None, echoes={NamespaceTool: _echo})
