"""`shell_call`: shell commands the client runs (the `shell` tool). The model sees a
function `shell(commands)`; a call is added and done as one `shell_call` item once its
commands are known. The client answers with a `shell_call_output`."""

from __future__ import annotations

import json
from typing import Any

from respond.engines._base import FunctionSpec, ToolCall
from respond.protocol.items import ShellAction, ShellCallItem
from respond.protocol.requests import ShellCallInput, ShellCallOutputInput
from respond.protocol.tools import ShellTool
from respond.responses.kinds._base import Kind, LateCall, Replay, Shown

__all__ = ["KIND", "NAME", "ShellCall"]

NAME = "shell"
SPEC = FunctionSpec(
    name=NAME,
    description="Run shell commands on the user's machine and read their output. The "
    "commands run in order, each in a shell.",
    parameters={
        "type": "object",
        "properties": {
            # A few commands: a small model may otherwise repeat one until its token limit.
            "commands": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": 8,
            },
        },
        "required": ["commands"],
        "additionalProperties": False,
    },
    strict=True,
)


class ShellCall(LateCall[ShellCallItem]):
    prefix = "sh"

    def item(self, arguments: dict[str, Any]) -> ShellCallItem:
        commands = [str(c) for c in arguments.get("commands") or []]
        action = ShellAction(commands=commands)
        return ShellCallItem(id=self.item_id, call_id=self.call_id, action=action)


def _replay(item: ShellCallInput, replay: Replay, where: str) -> None:
    commands = item.action.get("commands") or []
    arguments = json.dumps({"commands": commands}, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.call_id, name=NAME, arguments=arguments))


def _replay_output(item: ShellCallOutputInput, replay: Replay, where: str) -> None:
    replay.result(item.call_id, output_text(item.output))


def output_text(chunks: list[dict[str, Any]]) -> str:
    """What the model reads of a shell call's output: each command's stdout and stderr,
    and how it ended."""
    texts = []
    for chunk in chunks:
        outcome = chunk.get("outcome") or {}
        if outcome.get("type") == "timeout":
            ended = "(timed out)"
        else:
            ended = f"(exit code {outcome.get('exit_code')})"
        text = f"{chunk.get('stdout', '')}{chunk.get('stderr', '')}"
        texts.append(f"{text.rstrip()}\n{ended}".lstrip())
    return "\n\n".join(texts)


def _shown(tool: ShellTool) -> Shown:
    return Shown(spec=SPEC, opens=ShellCall.start, choice="shell")


def _echo(tool: ShellTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="shell_call",
    replays={ShellCallInput: _replay, ShellCallOutputInput: _replay_output},
    echoes={ShellTool: _echo},
    shows={ShellTool: _shown},
)
