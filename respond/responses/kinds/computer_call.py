"""`computer_call`: actions on a screen the client drives. The model sees a function
`computer` whose arguments are OpenAI's action shapes (click, double_click, drag, keypress,
move, screenshot, scroll, type, wait); a call is added and done as one `computer_call`
item. Two tools ask for it:
- `computer_use_preview`: one action per call, its coordinates bounded by the tool's
  display; the item carries `action`;
- `computer` (the GA tool): a batch of actions per call (`{"actions": [...]}`), the item
  carries `actions`; the tool names no display, so coordinates are bounded to four digits.
The client answers with a `computer_call_output` carrying a screenshot, which a vision
model sees."""

from __future__ import annotations

import json
from typing import Any

from respond.engines._base import ChatMessage, FunctionSpec, ToolCall
from respond.protocol.items import ComputerCallItem
from respond.protocol.requests import ComputerCallInput, ComputerCallOutputInput
from respond.protocol.tools import ComputerTool, ComputerUsePreviewTool
from respond.responses.kinds._base import Kind, LateCall, Replay, Shown

__all__ = ["ACTIONS", "KIND", "MAX_BATCH", "NAME", "BatchedComputerCall", "ComputerCall", "spec"]

NAME = "computer"
DESCRIPTION = (
    "Act on the user's screen: one action per call (click, double_click, drag, keypress, "
    "move, screenshot, scroll, type, wait). Coordinates are pixels from the top left."
)
ACTIONS = (
    "click",
    "double_click",
    "drag",
    "keypress",
    "move",
    "screenshot",
    "scroll",
    "type",
    "wait",
)
BATCH_DESCRIPTION = (
    "Act on the user's screen: a list of actions, done in order (click, double_click, drag, "
    "keypress, move, screenshot, scroll, type, wait). Coordinates are pixels from the top "
    "left of the last screenshot."
)
# The GA tool's batch: a few actions, so that a small model does not repeat one to its limit.
MAX_BATCH = 8
# The GA tool names no display: coordinates of up to four digits (an 8K screen's width).
_ANY_SCREEN = 10_000
_BUTTONS = ["left", "right", "wheel", "back", "forward"]
# A few keys, points and characters: a small model may otherwise repeat one until its limit.
_KEYS = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 4}


def _action(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"const": kind}, **fields},
        "required": ["type", *fields],
        "additionalProperties": False,
    }


def spec(width: int, height: int) -> FunctionSpec:
    """The function the model sees for a display of this size (one action a call)."""
    return FunctionSpec(
        name=NAME,
        description=DESCRIPTION,
        parameters={"type": "object", "anyOf": _actions(width, height)},
        strict=True,
    )


def batch_spec() -> FunctionSpec:
    """The function the model sees for the GA `computer` tool (a batch of actions)."""
    batch = {"type": "array", "items": {"anyOf": _actions(_ANY_SCREEN, _ANY_SCREEN)}}
    return FunctionSpec(
        name=NAME,
        description=BATCH_DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {"actions": {**batch, "minItems": 1, "maxItems": MAX_BATCH}},
            "required": ["actions"],
            "additionalProperties": False,
        },
        strict=True,
    )


def _actions(width: int, height: int) -> list[dict[str, Any]]:
    x = {"type": "integer", "minimum": 0, "maximum": width - 1}
    y = {"type": "integer", "minimum": 0, "maximum": height - 1}
    point = {
        "type": "object",
        "properties": {"x": x, "y": y},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    scroll = {"type": "integer", "minimum": -height, "maximum": height}
    return [
        _action("click", button={"type": "string", "enum": _BUTTONS}, x=x, y=y),
        _action("double_click", x=x, y=y),
        _action("drag", path={"type": "array", "items": point, "minItems": 2, "maxItems": 4}),
        _action("keypress", keys=_KEYS),
        _action("move", x=x, y=y),
        _action("screenshot"),
        _action("scroll", x=x, y=y, scroll_x=scroll, scroll_y=scroll),
        _action("type", text={"type": "string", "minLength": 1, "maxLength": 200}),
        _action("wait"),
    ]


class ComputerCall(LateCall[ComputerCallItem]):
    prefix = "cu"

    def item(self, arguments: dict[str, Any]) -> ComputerCallItem:
        # Valid by the strict schema; a call that is not (a cut-short one never gets here)
        # is the harmless screenshot.
        action = arguments if arguments.get("type") in ACTIONS else {"type": "screenshot"}
        return ComputerCallItem(id=self.item_id, call_id=self.call_id, action=action)


class BatchedComputerCall(LateCall[ComputerCallItem]):
    prefix = "cu"

    def item(self, arguments: dict[str, Any]) -> ComputerCallItem:
        # As above: what the strict schema lets through, else the harmless screenshot.
        actions = arguments.get("actions")
        if not isinstance(actions, list) or not actions:
            actions = [{"type": "screenshot"}]
        return ComputerCallItem(id=self.item_id, call_id=self.call_id, action=None, actions=actions)


def _replay(item: ComputerCallInput, replay: Replay, where: str) -> None:
    # The call as the model wrote it: one action (preview), or the batch (GA).
    written: Any = item.action if item.actions is None else {"actions": item.actions}
    arguments = json.dumps(written, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.call_id, name=NAME, arguments=arguments))


def _replay_output(item: ComputerCallOutputInput, replay: Replay, where: str) -> None:
    """The screenshot: seen by a vision model (by its URL); any other is told it was taken."""
    url = item.output.image_url
    if replay.vision and url:
        replay.messages.append(
            ChatMessage(
                role="tool",
                content="The screen after the action:",
                tool_call_id=item.call_id,
                images=(url,),
            )
        )
        return
    replay.result(item.call_id, "Done; a screenshot of the screen was taken after the action.")


def _shown(tool: ComputerUsePreviewTool) -> Shown:
    return Shown(
        spec=spec(tool.display_width, tool.display_height),
        opens=ComputerCall.start,
        choice="computer_use_preview",
    )


def _shown_batched(tool: ComputerTool) -> Shown:
    return Shown(spec=batch_spec(), opens=BatchedComputerCall.start, choice="computer")


def _echo(tool: ComputerUsePreviewTool) -> dict[str, Any]:
    return {
        "type": "computer_use_preview",
        "display_width": tool.display_width,
        "display_height": tool.display_height,
        "environment": tool.environment,
    }


KIND = Kind(
    item_type="computer_call",
    replays={ComputerCallInput: _replay, ComputerCallOutputInput: _replay_output},
    echoes={ComputerUsePreviewTool: _echo, ComputerTool: lambda tool: {"type": "computer"}},
    shows={ComputerUsePreviewTool: _shown, ComputerTool: _shown_batched},
)
