"""`custom_tool_call`: a call of a `custom` tool, with free-form `input` instead of JSON
arguments. The model sees the tool as a function taking one string, `input`; the engine
writes {"input": "..."}, and the item's input is that string, known once the call ends."""

from __future__ import annotations

import json

from respond import _model_json as model_json
from respond.engines import _base as d
from respond.engines._base import FunctionSpec, InputGrammar, ToolCall
from respond.protocol import events as ev
from respond.protocol.items import CustomToolCallItem
from respond.protocol.requests import CustomToolCallInput, CustomToolCallOutputInput
from respond.protocol.tools import CustomTool, CustomToolGrammar
from respond.responses.kinds._base import Kind, QuietCall, Replay, Shown, Status
from respond.responses.kinds.function_call import replay_output

__all__ = ["KIND", "CustomToolCall"]


class CustomToolCall(QuietCall[CustomToolCallItem]):
    prefix = "ctc"

    def __init__(self, call_id: str, name: str, namespace: str | None = None) -> None:
        self.call_id, self.name, self.namespace = call_id, name, namespace

    @classmethod
    def start(cls, delta: d.ToolCallStart) -> CustomToolCall:
        return cls(delta.call_id, delta.name)

    def added(self) -> tuple[CustomToolCallItem, list[ev.Event]]:
        item = CustomToolCallItem(
            id=self.item_id, call_id=self.call_id, name=self.name, namespace=self.namespace
        )
        return item, []

    def end(self) -> list[ev.Event]:
        try:
            value = model_json.loads(self.arguments).get("input", "")
        except (ValueError, AttributeError):
            value = ""  # cut short by the token limit: no complete input
        return [ev.CustomToolCallInputDelta(**self.ids(), delta=str(value))]

    def close(self, item: CustomToolCallItem, status: Status) -> list[ev.Event]:
        done = ev.CustomToolCallInputDone(**self.ids(), input=item.input)
        return [done, *self.done(item, status)]


def _resume(item: CustomToolCallItem) -> CustomToolCall:
    return CustomToolCall(item.call_id, item.name, item.namespace)


def _replay(item: CustomToolCallInput, replay: Replay, where: str) -> None:
    arguments = json.dumps({"input": item.input}, ensure_ascii=False)
    name = item.name if item.namespace is None else replay.namespaced(item.namespace, item.name)
    replay.call(ToolCall(call_id=item.call_id, name=name, arguments=arguments))


def shown(tool: CustomTool) -> Shown:
    """A function taking one string, `input`, in the language of the tool's grammar (when
    it has one). The grammar travels beside the schema, not in it as a `pattern`: engines
    enforce it themselves (engines/grammars), and an upstream's JSON-Schema converter may
    not take Python's regex syntax (llama.cpp's copies `\\d` into its grammar as it is)."""
    fmt = tool.format
    grammar = None
    if isinstance(fmt, CustomToolGrammar):
        grammar = InputGrammar(syntax=fmt.syntax, definition=fmt.definition)
    parameters = {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
        "additionalProperties": False,
    }
    spec = FunctionSpec(
        name=tool.name,
        description=tool.description,
        parameters=parameters,
        strict=True,
        grammar=grammar,
    )
    return Shown(spec=spec, opens=CustomToolCall.start)


# Custom tools are not echoed in response.tools (the Open Responses tool schema has no
# such tool; docs/tools.md).
KIND = Kind(
    item_type="custom_tool_call",
    resume=_resume,
    replays={CustomToolCallInput: _replay, CustomToolCallOutputInput: replay_output},
    shows={CustomTool: shown},
)
