"""`apply_patch_call`: a file edit the client applies (the `apply_patch` tool). The model
sees a function `apply_patch(type, path, diff)`; a call is added and done as one
`apply_patch_call` item with its `operation` (create_file and update_file with a V4A
diff, delete_file with its path only). The client answers with an
`apply_patch_call_output` (status completed or failed, and an optional output)."""

from __future__ import annotations

import json
from typing import Any

from respond.engines._base import FunctionSpec, ToolCall
from respond.protocol.items import ApplyPatchCallItem, PatchOperation
from respond.protocol.requests import ApplyPatchCallInput, ApplyPatchCallOutputInput
from respond.protocol.tools import ApplyPatchTool
from respond.responses.kinds._base import Kind, LateCall, Replay, Shown

__all__ = ["KIND", "NAME", "ApplyPatchCall"]

NAME = "apply_patch"
_OPERATIONS = ["create_file", "update_file", "delete_file"]
SPEC = FunctionSpec(
    name=NAME,
    description="Create, update or delete one file. `diff` is a V4A diff: for create_file "
    "every line of the new file starts with '+'; for update_file, hunks that start with "
    "'@@', then lines starting with ' ' (kept), '-' (removed) or '+' (added); for "
    'delete_file, "".',
    parameters={
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": _OPERATIONS},
            "path": {"type": "string", "minLength": 1},
            "diff": {"type": "string"},
        },
        "required": ["type", "path", "diff"],
        "additionalProperties": False,
    },
    strict=True,
)


class ApplyPatchCall(LateCall[ApplyPatchCallItem]):
    prefix = "apc"

    def item(self, arguments: dict[str, Any]) -> ApplyPatchCallItem:
        kind = arguments.get("type")
        operation = PatchOperation(
            type=kind if kind in _OPERATIONS else "update_file",
            path=str(arguments.get("path", "")),
            diff=None if kind == "delete_file" else str(arguments.get("diff", "")),
        )
        return ApplyPatchCallItem(id=self.item_id, call_id=self.call_id, operation=operation)


def _replay(item: ApplyPatchCallInput, replay: Replay, where: str) -> None:
    operation = item.operation
    arguments = {
        "type": operation.get("type"),
        "path": operation.get("path"),
        "diff": operation.get("diff", ""),
    }
    text = json.dumps(arguments, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.call_id, name=NAME, arguments=text))


def _replay_output(item: ApplyPatchCallOutputInput, replay: Replay, where: str) -> None:
    said = f": {item.output}" if item.output else ""
    replay.result(
        item.call_id, f"The patch {'was applied' if item.status == 'completed' else 'failed'}{said}"
    )


def _shown(tool: ApplyPatchTool) -> Shown:
    return Shown(spec=SPEC, opens=ApplyPatchCall.start, choice="apply_patch")


def _echo(tool: ApplyPatchTool) -> dict[str, Any]:
    return {"type": "apply_patch"}


KIND = Kind(
    item_type="apply_patch_call",
    replays={ApplyPatchCallInput: _replay, ApplyPatchCallOutputInput: _replay_output},
    echoes={ApplyPatchTool: _echo},
    shows={ApplyPatchTool: _shown},
)
