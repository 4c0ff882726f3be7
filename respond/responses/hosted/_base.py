"""What the families hand one run, whatever the family (hosted/_toolset.py combines them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from respond.engines._base import FunctionSpec
from respond.protocol.errors import APIError
from respond.protocol.tools import FunctionTool
from respond.responses.hosted_call import HostedTool, sanitized, visible_names
from respond.responses.kinds import Item

__all__ = ["Approved", "Hosted", "refuse_named_function", "visible_names"]


@dataclass(frozen=True)
class Approved:
    """A call the client approved (an `mcp_approval_response`), run before the first turn."""

    approval_request_id: str
    tool: HostedTool
    arguments: str


@dataclass
class Hosted:
    """The hosted tools of one run: what one family offers, or all of them together."""

    tools: dict[str, HostedTool] = field(default_factory=dict)  # by visible name
    # Items added and done before the first turn (an MCP server's listing).
    first: list[Item[Any]] = field(default_factory=list)
    approved: list[Approved] = field(default_factory=list)
    # A tool_choice naming a family's tools: the visible names the first turn must call.
    forced: tuple[str, ...] | None = None

    def join(self, offer: Hosted) -> None:
        """Add what one more family offers (tool_choice forces one family's tools at most)."""
        self.tools.update(offer.tools)
        self.first += offer.first
        self.approved += offer.approved
        self.forced = self.forced or offer.forced

    def specs(self, enforceable: Callable[[Mapping[str, Any]], bool]) -> list[FunctionSpec]:
        """The functions the model sees. Strict (arguments valid by construction) where the
        engine can enforce the server's schema; otherwise the server judges the arguments
        (an invalid call comes back as an error the model reads)."""
        shown = [tool for tool in self.tools.values() if tool.deferred is None]
        return [tool.spec(enforceable(tool.parameters)) for tool in shown]

    def searchable(
        self, enforceable: Callable[[Mapping[str, Any]], bool]
    ) -> list[tuple[FunctionSpec, Mapping[str, Any]]]:
        """The deferred tools a search may load: the function the model will see, and how
        a search lists it."""
        return [
            (tool.spec(enforceable(tool.parameters)), tool.deferred)
            for tool in self.tools.values()
            if tool.deferred is not None
        ]

    def visible(self, server_label: str, name: str) -> str:
        """The function name the model sees for a server's tool (also in replayed items)."""
        for tool in self.tools.values():
            if tool.server_label == server_label and tool.name == name:
                return tool.visible
        return sanitized(name)


def refuse_named_function(
    tools: Sequence[object], name: str, family: str, param: str, why: str = ""
) -> None:
    """400 when a client function takes `name`, the function a family shows the model for
    its tool: the model's calls of it could not be told apart. `why` ends the message."""
    if any(isinstance(t, FunctionTool) and t.name == name for t in tools):
        message = f"A function may not be named '{name}' beside the {family} tool{why}."
        raise APIError(400, message, param=param)
