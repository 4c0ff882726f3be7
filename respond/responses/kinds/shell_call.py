"""`shell_call`: shell commands the client runs (the `shell` tool). The model sees a
function `shell(commands)`; a call is added and done as one `shell_call` item once its
commands are known. The client answers with a `shell_call_output`.

A `shell` whose `environment` is a container (`container_auto`, `container_reference`) is
run by respond instead (hosted/shell.py): its call is added once its commands are known,
done once they ran in the container, and its `shell_call_output` follows it in the same
response."""

from __future__ import annotations

import json
from typing import Any

from respond import _model_json as model_json
from respond._ids import new_id
from respond.engines._base import FunctionSpec, ToolCall
from respond.protocol import events as ev
from respond.protocol.items import ShellAction, ShellCallItem, ShellCallOutputItem
from respond.protocol.requests import ShellCallInput, ShellCallOutputInput
from respond.protocol.tools import ShellTool
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds._base import Item, Kind, LateCall, Replay, Shown, Status

__all__ = [
    "HOSTED",
    "HOSTED_PARAMETERS",
    "KIND",
    "NAME",
    "HostedShellCall",
    "ShellCall",
    "hosted",
    "output_text",
]

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


_LIMITS = ("timeout_ms", "max_output_length")
# The hosted shell's function: the client's, and the limits OpenAI's shell action has.
HOSTED_PARAMETERS: dict[str, Any] = {
    **SPEC.parameters,
    "properties": {
        **SPEC.parameters["properties"],
        "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000},
        "max_output_length": {"type": "integer", "minimum": 1, "maximum": 1000000},
    },
}


class ShellCall(LateCall[ShellCallItem]):
    prefix = "sh"

    def item(self, arguments: dict[str, Any]) -> ShellCallItem:
        commands = [str(c) for c in arguments.get("commands") or []]
        # A hosted shell's model may also bound its commands (HOSTED_SPEC).
        limits = {k: v for k in _LIMITS if isinstance(v := arguments.get(k), int)}
        action = ShellAction(commands=commands, **limits)
        return ShellCallItem(id=self.item_id, call_id=self.call_id, action=action)


# The environments of a shell respond runs (in a container of its own sandbox).
HOSTED = ("container_auto", "container_reference")


def hosted(tool: ShellTool) -> bool:
    """Whether respond runs this shell tool's calls (else the client does)."""
    environment = tool.environment
    return isinstance(environment, dict) and environment.get("type") in HOSTED


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> HostedShellCall:
    # The call id pairs the shell_call with its shell_call_output (and replays them).
    return HostedShellCall(new_id("call"), NAME, tool.container_id or "")


class HostedShellCall(ShellCall):
    """A call of a shell respond runs: added once its commands are known, pending until
    they ran, then done; its output item follows it."""

    def __init__(self, call_id: str, name: str, container_id: str = "") -> None:
        super().__init__(call_id, name)
        self.container_id = container_id

    def item(self, arguments: dict[str, Any]) -> ShellCallItem:
        item = super().item(arguments)
        item.environment = {"type": "container_reference", "container_id": self.container_id}
        return item

    def close(self, item: ShellCallItem, status: Status) -> list[ev.Event]:
        if status != "completed":
            return self.done(item, status)
        self.pending = True  # the run executes it, then it is done
        return []

    def executed(self, item: ShellCallItem, result: CallResult) -> list[ev.Event]:
        for container_id, file_id, path in result.written:
            self.shared.written[file_id] = (container_id, path)
        return self.done(item, "completed")

    def follows(self, result: CallResult) -> Item[Any]:
        try:
            asked = model_json.loads(self.arguments).get("max_output_length")
        except (ValueError, AttributeError):
            asked = None
        limit = asked if isinstance(asked, int) else None
        return ShellCallOutput(self.call_id, result.outputs or [], limit)


class ShellCallOutput(Item[ShellCallOutputItem]):
    """The output of a shell call respond ran: added and done at once."""

    prefix = "sho"

    def __init__(
        self, call_id: str, output: list[dict[str, Any]], max_output_length: int | None = None
    ) -> None:
        self.call_id, self.output, self.max_output_length = call_id, output, max_output_length

    def added(self) -> tuple[ShellCallOutputItem, list[ev.Event]]:
        item = ShellCallOutputItem(
            id=self.item_id,
            call_id=self.call_id,
            output=self.output,
            max_output_length=self.max_output_length,
        )
        return item, []

    def close(self, item: ShellCallOutputItem, status: Status) -> list[ev.Event]:
        return self.done(item, "completed")


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


def _shown(tool: ShellTool) -> Shown | None:
    if hosted(tool):
        return None  # a hosted tool: its family offers it (hosted/shell.py)
    return Shown(spec=SPEC, opens=ShellCall.start, choice="shell")


def _echo(tool: ShellTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="shell_call",
    replays={ShellCallInput: _replay, ShellCallOutputInput: _replay_output},
    echoes={ShellTool: _echo},
    shows={ShellTool: _shown},
    runs={"shell": for_tool},
)
