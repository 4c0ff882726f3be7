"""The seam of a hosted family: what one kind of tool respond runs itself gives a run.

A family (mcp.py, file_search.py, code_interpreter.py, tool_search.py) reads a request and
offers the run its tools (`Hosted`: the functions the model sees, each with the executor
that runs its calls and the family whose item kind a call becomes; items to add first;
approved calls; the names a tool_choice forces). Every request error is raised here,
before anything streams. `Toolsets` combines the families: the run prepares and echoes
through it and names none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from respond.engines._base import FunctionSpec
from respond.protocol.requests import CreateResponseBody, InputItem
from respond.responses.hosted._base import Hosted

__all__ = ["Deferred", "Family", "Request", "Toolsets"]


@dataclass(frozen=True)
class Deferred:
    """A deferred tool: the function the model will see, and its definition as the
    request gave it (what a tool_search_output lists)."""

    spec: FunctionSpec
    wire: dict[str, Any]


@dataclass(frozen=True)
class Request:
    """What a family reads of one request."""

    body: CreateResponseBody
    tenant: str | None
    history: Sequence[InputItem]  # the stored context before this input
    new: Sequence[InputItem]  # this request's input
    # Whether the engine enforces a schema (a tool is then strict).
    enforceable: Callable[[Mapping[str, Any]], bool]
    # The request's own deferred functions that no search has loaded yet (checked when
    # first asked for: the families before see the request first).
    deferred: Callable[[], Sequence[Deferred]] = tuple

    @property
    def items(self) -> list[InputItem]:
        return [*self.history, *self.new]


class Family(Protocol):
    """One kind of hosted tool. `offered` is what the families before it offer (a tool
    search finds their deferred tools)."""

    async def prepare(self, request: Request, offered: Hosted) -> Hosted: ...

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`response.tools` as echoed (a family this server does not run leaves its tool
        out, as every tool type respond does not run)."""
        ...


class Toolsets:
    """The families of a server, combined: prepared in order, their offers joined."""

    def __init__(self, families: Sequence[Family]) -> None:
        self.families = list(families)

    async def prepare(self, request: Request) -> Hosted:
        hosted = Hosted()
        for family in self.families:
            hosted.join(await family.prepare(request, hosted))
        return hosted

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for family in self.families:
            tools = family.echoed(tools)
        return tools
