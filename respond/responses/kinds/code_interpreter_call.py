"""`code_interpreter_call`: Python respond runs for the model in a container. Added and in
progress; its code streams as the model writes it (`{"code": "..."}` arguments, decoded
as they come); interpreting once the code is complete (the call's end); completed when the
sandbox has run it. The files its code wrote are cited by the answer that follows. It
replays as the `python` function call the model made and the output it read."""

from __future__ import annotations

import json
import re
from typing import Any

from respond import _model_json as model_json
from respond.engines import _base as d
from respond.engines._base import ToolCall
from respond.protocol import events as ev
from respond.protocol.items import CodeInterpreterCallItem
from respond.protocol.requests import CodeInterpreterCallInput
from respond.protocol.tools import CodeInterpreterTool
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds._base import Item, Kind, Replay, Status

__all__ = ["KIND", "VISIBLE", "CodeInterpreterCall", "for_tool", "logs_text"]

VISIBLE = "python"  # the function the model sees (OpenAI's models know the tool so)
NOT_KEPT = "(The output of this run was not kept: include code_interpreter_call.outputs.)"


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> CodeInterpreterCall:
    return CodeInterpreterCall(tool.container_id or "")


class CodeInterpreterCall(Item[CodeInterpreterCallItem]):
    prefix = "ci"

    def __init__(self, container_id: str, sent: str = "") -> None:
        self.container_id = container_id
        self.arguments = ""
        self.sent = sent  # the code streamed so far

    def added(self) -> tuple[CodeInterpreterCallItem, list[ev.Event]]:
        item = CodeInterpreterCallItem(id=self.item_id, container_id=self.container_id)
        return item, [ev.CodeInterpreterCallInProgress(**self.ids())]

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.ToolCallArgumentsDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        if not isinstance(delta, d.ToolCallArgumentsDelta):
            return []
        self.arguments += delta.arguments
        return self._more(partial_code(self.arguments))

    def end(self) -> list[ev.Event]:
        try:
            code = model_json.loads(self.arguments).get("code")
        except (ValueError, AttributeError):
            code = None  # cut short by the token limit: what streamed is all there is
        return self._more(code if isinstance(code, str) else self.sent)

    def _more(self, code: str) -> list[ev.Event]:
        if len(code) <= len(self.sent) or not code.startswith(self.sent):
            return []
        delta, self.sent = code[len(self.sent) :], code
        return [ev.CodeInterpreterCallCodeDelta(**self.ids(), delta=delta)]

    def close(self, item: CodeInterpreterCallItem, status: Status) -> list[ev.Event]:
        done = ev.CodeInterpreterCallCodeDone(**self.ids(), code=item.code or "")
        if status != "completed":
            return [done, *self.done(item, status)]
        self.pending = True  # the run executes it, then it is done
        return [done, ev.CodeInterpreterCallInterpreting(**self.ids())]

    def executed(self, item: CodeInterpreterCallItem, result: CallResult) -> list[ev.Event]:
        item.outputs = result.outputs
        for container_id, file_id, path in result.written:
            self.shared.written[file_id] = (container_id, path)
        if result.error is not None or result.stopped:
            return self.done(item, "failed")
        return [ev.CodeInterpreterCallCompleted(**self.ids()), *self.done(item, "completed")]


_CODE_START = re.compile(r'"code"\s*:\s*"')


def partial_code(arguments: str) -> str:
    """The `code` string of JSON arguments that are still streaming, decoded as far as it
    is complete (an escape cut in two waits for its other half)."""
    start = _CODE_START.search(arguments)
    if start is None:
        return ""
    raw = arguments[start.end() :]
    index, safe = 0, 0
    while index < len(raw):
        char = raw[index]
        if char == '"':
            break
        step = 1
        if char == "\\":
            step = 6 if raw[index + 1 : index + 2] == "u" else 2
            if index + step > len(raw):
                break
        index += step
        safe = index
    try:
        code: str = json.loads(f'"{raw[:safe]}"')
    except ValueError:
        return ""
    if code and "\ud800" <= code[-1] <= "\udbff":
        code = code[:-1]  # half of a surrogate pair: the other half is still to come
    return model_json.valid_text(code)  # as the whole arguments are read at the end


def _resume(item: CodeInterpreterCallItem) -> CodeInterpreterCall:
    return CodeInterpreterCall(item.container_id, item.code or "")


def logs_text(outputs: list[dict[str, Any]] | None) -> str:
    """What the model reads of a run's outputs: its logs, and a line per image."""
    if outputs is None:
        return NOT_KEPT
    parts = []
    for output in outputs:
        if output.get("type") == "logs":
            parts.append(str(output.get("logs", "")))
        elif output.get("type") == "image":
            parts.append("[An image was shown.]")
    return "\n".join(parts) or "(no output)"


def _replay(item: CodeInterpreterCallInput, replay: Replay, where: str) -> None:
    """The call as the model made it (the `python` function) and the output it read."""
    arguments = json.dumps({"code": item.code or ""}, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.id, name=VISIBLE, arguments=arguments))
    replay.result(item.id, logs_text(item.outputs))


def _echo(tool: CodeInterpreterTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="code_interpreter_call",
    resume=_resume,
    replays={CodeInterpreterCallInput: _replay},
    echoes={CodeInterpreterTool: _echo},
    runs={"code_interpreter": for_tool},
)
