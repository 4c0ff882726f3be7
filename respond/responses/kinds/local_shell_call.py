"""`local_shell_call`: a command the client runs (the older `local_shell` tool). The model
sees a function `local_shell(command)`, the command as its argv; a call is added and done
as one `local_shell_call` item once its command is known. The client answers with a
`local_shell_call_output` whose `id` is the call's call_id."""

from __future__ import annotations

import json
from typing import Any

from respond.engines._base import FunctionSpec, ToolCall
from respond.protocol.items import LocalShellAction, LocalShellCallItem
from respond.protocol.requests import LocalShellCallInput, LocalShellCallOutputInput
from respond.protocol.tools import LocalShellTool
from respond.responses.kinds._base import Kind, LateCall, Replay, Shown

__all__ = ["KIND", "NAME", "LocalShellCall"]

NAME = "local_shell"
SPEC = FunctionSpec(
    name=NAME,
    description="Run a command on the user's machine and read its output: `command` is "
    'the program and its arguments, e.g. ["ls", "-l"].',
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    strict=True,
)


class LocalShellCall(LateCall[LocalShellCallItem]):
    prefix = "lsh"

    def item(self, arguments: dict[str, Any]) -> LocalShellCallItem:
        command = [str(c) for c in arguments.get("command") or []]
        action = LocalShellAction(command=command)
        return LocalShellCallItem(id=self.item_id, call_id=self.call_id, action=action)


def _replay(item: LocalShellCallInput, replay: Replay, where: str) -> None:
    arguments = json.dumps({"command": item.action.get("command") or []}, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.call_id, name=NAME, arguments=arguments))


def _replay_output(item: LocalShellCallOutputInput, replay: Replay, where: str) -> None:
    replay.result(item.id, item.output)


def _shown(tool: LocalShellTool) -> Shown:
    return Shown(spec=SPEC, opens=LocalShellCall.start, choice="local_shell")


def _echo(tool: LocalShellTool) -> dict[str, Any]:
    return {"type": "local_shell"}


KIND = Kind(
    item_type="local_shell_call",
    replays={LocalShellCallInput: _replay, LocalShellCallOutputInput: _replay_output},
    echoes={LocalShellTool: _echo},
    shows={LocalShellTool: _shown},
)
