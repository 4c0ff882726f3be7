"""`function_call`: a call of a function tool, which the client runs (its output comes back
as `function_call_output`)."""

from __future__ import annotations

from typing import Any

from respond.engines import _base as d
from respond.engines._base import ToolCall
from respond.protocol import events as ev
from respond.protocol.items import FunctionCallItem
from respond.protocol.requests import (
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
)
from respond.protocol.tools import FunctionTool
from respond.responses.kinds._base import Item, Kind, Replay, Status
from respond.responses.kinds.message import parts_text

__all__ = ["KIND", "FunctionCall", "replay_output"]


class FunctionCall(Item[FunctionCallItem]):
    prefix = "fc"

    def __init__(self, call_id: str, name: str, namespace: str | None = None) -> None:
        self.call_id, self.name, self.namespace = call_id, name, namespace

    @classmethod
    def start(cls, delta: d.ToolCallStart) -> FunctionCall:
        return cls(delta.call_id, delta.name)

    def added(self) -> tuple[FunctionCallItem, list[ev.Event]]:
        item = FunctionCallItem(
            id=self.item_id, call_id=self.call_id, name=self.name, namespace=self.namespace
        )
        return item, []

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.ToolCallArgumentsDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        if not isinstance(delta, d.ToolCallArgumentsDelta):
            return []
        return [ev.FunctionCallArgumentsDelta(**self.ids(), delta=delta.arguments)]

    def close(self, item: FunctionCallItem, status: Status) -> list[ev.Event]:
        done = ev.FunctionCallArgumentsDone(**self.ids(), arguments=item.arguments)
        return [done, *self.done(item, status)]


def _resume(item: FunctionCallItem) -> FunctionCall:
    return FunctionCall(item.call_id, item.name, item.namespace)


def _replay(item: FunctionCallInput, replay: Replay, where: str) -> None:
    name = item.name if item.namespace is None else replay.namespaced(item.namespace, item.name)
    replay.call(ToolCall(call_id=item.call_id, name=name, arguments=item.arguments))


def replay_output(
    item: FunctionCallOutputInput | CustomToolCallOutputInput, replay: Replay, where: str
) -> None:
    """A tool's output, as the tool message that answers its call."""
    output = item.output
    text = output if isinstance(output, str) else parts_text(output, replay.vision, where)[0]
    replay.result(item.call_id, text)


def _echo(tool: FunctionTool) -> dict[str, Any]:
    echoed = {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": True if tool.strict is None else tool.strict,
    }
    if tool.defer_loading is not None:
        echoed["defer_loading"] = tool.defer_loading
    return echoed


KIND = Kind(
    item_type="function_call",
    resume=_resume,
    replays={FunctionCallInput: _replay, FunctionCallOutputInput: replay_output},
    echoes={FunctionTool: _echo},
)
