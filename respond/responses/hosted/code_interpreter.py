"""The code_interpreter family: Python run by respond in a sandboxed container, inside the
response.

A request's `{"type": "code_interpreter", "container": ...}` tool becomes one hosted tool
the model sees as the function `python(code)`. The container is the one named
(`"cntr_..."`), or, for `{"type": "auto", "file_ids": [...]}`, the container of the last
code_interpreter_call in the context when it is still running (a chain keeps its files),
else a new one made at the first call with copies of those files. Calls run in the
sandbox (respond/containers/), become `code_interpreter_call` items, and their output joins
the context for the next turn. Without `--code-interpreter` the tool is accepted and not
run: the model does not see it (logged once).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence
from typing import Any

from respond import _model_json as model_json
from respond._ids import new_id
from respond.containers import MAX_IMAGES, MAX_IMAGES_BYTES, ContainerService, Ran, SandboxError
from respond.protocol.errors import APIError
from respond.protocol.requests import CodeInterpreterCallInput, InputItem
from respond.protocol.tools import CodeInterpreterTool
from respond.responses.hosted._base import Hosted, refuse_named_function
from respond.responses.hosted._containers import InContainer, held_container, new_container_files
from respond.responses.hosted._toolset import Request
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds.code_interpreter_call import VISIBLE, logs_text

__all__ = ["INCLUDE_OUTPUTS", "CodeInterpreterTools"]

log = logging.getLogger("respond.tools")

INCLUDE_OUTPUTS = "code_interpreter_call.outputs"
AUTO_NAME = "code_interpreter (auto)"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python code to run."}},
    "required": ["code"],
    "additionalProperties": False,
}
DESCRIPTION = (
    "Run Python 3 code in a sandbox without network access. The working directory is "
    "/mnt/data, which holds the user's files; files written there are kept and shown to "
    "the user. print() what you need to see: the output (and the value of a last "
    "expression) is returned."
)
_OFF_LOGGED: list[bool] = []  # the tool given to a server that does not run it: logged once


class CodeInterpreterTools:
    """Makes the code_interpreter tool of a request (when the server runs code)."""

    def __init__(self, service: ContainerService | None = None) -> None:
        self.service = service

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`response.tools` as echoed: without the tool when this server does not run it
        (as every tool type respond does not run)."""
        if self.service is not None:
            return tools
        return [tool for tool in tools if tool.get("type") != "code_interpreter"]

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The request's code_interpreter tool, forced when `tool_choice` names it. Its
        container is checked now: a missing one is a 404, an expired one a 400, one held by
        another replica a 409, each naming the field."""
        body, tenant, context = request.body, request.tenant, request.items
        found = [(i, t) for i, t in enumerate(body.tools) if isinstance(t, CodeInterpreterTool)]
        choice = body.tool_choice
        forced = isinstance(choice, dict) and choice.get("type") == "code_interpreter"
        if not found or self.service is None:
            if forced:
                why = "no such tool is given" if not found else _OFF
                raise APIError(
                    400, f"tool_choice names code_interpreter, but {why}.", param="tool_choice"
                )
            if found and not _OFF_LOGGED:
                _OFF_LOGGED.append(True)
                log.info("tool type 'code_interpreter' is not run: %s", _OFF)
            return Hosted()
        if len(found) > 1:
            raise APIError(
                400, "Give at most one code_interpreter tool.", param=f"tools[{found[1][0]}]"
            )
        index, tool = found[0]
        where = f"tools[{index}]"
        why = " (the model sees code_interpreter as that function)"
        refuse_named_function(body.tools, VISIBLE, "code_interpreter", where, why)
        executor = await self._executor(tool, where, tenant, context, body.include)
        hosted = HostedTool(
            visible=VISIBLE,
            server_label="code_interpreter",
            name=VISIBLE,
            description=DESCRIPTION,
            parameters=PARAMETERS,
            needs_approval=False,
            executor=executor,
            family="code_interpreter",
            container_id=executor.container_id,
        )
        return Hosted(tools={VISIBLE: hosted}, forced=(VISIBLE,) if forced else None)

    async def _executor(
        self,
        tool: CodeInterpreterTool,
        where: str,
        tenant: str | None,
        context: Sequence[InputItem],
        include: Sequence[str],
    ) -> _Executor:
        service = self.service
        assert service is not None
        container = tool.container
        keep = INCLUDE_OUTPUTS in include
        if isinstance(container, str) and container:
            await held_container(service, tenant, container, f"{where}.container")
            return _Executor(service, tenant, container, None, keep)
        if not isinstance(container, dict) or container.get("type") != "auto":
            raise APIError(
                400,
                '\'container\' must be a container id, or {"type": "auto"} with optional '
                "'file_ids'.",
                param=f"{where}.container",
            )
        files = container.get("file_ids")
        file_ids = await new_container_files(service, tenant, files, f"{where}.container.file_ids")
        reused = await _reused(service, tenant, context)
        if reused is not None:
            await service.held(tenant, reused, f"{where}.container")
            return _Executor(service, tenant, reused, None, keep)
        return _Executor(service, tenant, new_id("cntr"), file_ids, keep)


_OFF = "this server does not run code (start respond with --code-interpreter)"


async def _reused(
    service: ContainerService, tenant: str | None, context: Sequence[InputItem]
) -> str | None:
    """The container of the context's last code_interpreter_call, if it still runs."""
    for item in reversed(context):
        if isinstance(item, CodeInterpreterCallInput):
            container = await service.get(tenant, item.container_id)
            running = container is not None and container["status"] == "running"
            return item.container_id if running else None
    return None


class _Executor(InContainer):
    auto_name = AUTO_NAME

    def __init__(
        self,
        service: ContainerService,
        tenant: str | None,
        container_id: str,
        create_with: list[str] | None,
        keep: bool,
    ) -> None:
        super().__init__(service, tenant, container_id, create_with)
        self.keep = keep  # the item keeps its outputs (include)

    async def call(self, name: str, arguments: str) -> CallResult:
        try:
            code = model_json.loads(arguments)["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if not isinstance(code, str):
            error = {"type": "invalid_arguments", "message": "python needs 'code'."}
            return CallResult(error=error)
        try:
            ran = await self.run_in_container(code)
        except (APIError, SandboxError) as exc:
            # The container went (deleted, expired) or the sandbox failed: the call fails,
            # and the model is told so.
            message = exc.message if isinstance(exc, APIError) else str(exc)
            return CallResult(
                error={"type": "sandbox_error", "message": message},
                outputs=[] if self.keep else None,
                stopped=True,
            )
        return self._result(ran)

    def _result(self, ran: Ran) -> CallResult:
        outcome = ran.outcome
        logs = outcome.output
        if outcome.truncated:
            logs += "\n[The output was cut: only its first 64 KiB are kept.]"
        note = _stopped(ran, self.service)
        for said in (note, *_cut(ran, self.service)):
            if said:
                logs = f"{logs.rstrip()}\n{said}" if logs.strip() else said
        outputs: list[dict[str, Any]] = [{"type": "logs", "logs": logs}] if logs else []
        outputs += [{"type": "image", "url": url} for url in ran.images]
        text = logs_text(outputs)
        if ran.written:
            text += "\nFiles written: " + ", ".join(str(f["path"]) for f in ran.written)
        return CallResult(
            output=text,
            outputs=outputs if self.keep else None,
            stopped=bool(note),
            written=tuple((self.container_id, f["id"], str(f["path"])) for f in ran.written),
        )


def _cut(ran: Ran, service: ContainerService) -> list[str]:
    """What a limit left out of the call's files and images."""
    said = ran.outcome.dropped.notes(service.sandbox.limits)
    if ran.images_not_shown:
        said.append(
            f"[{ran.images_not_shown} images not shown: a call shows at most {MAX_IMAGES} "
            f"images, {MAX_IMAGES_BYTES >> 20} MiB in all. They are in the container's files.]"
        )
    return said


def _stopped(ran: Ran, service: ContainerService) -> str:
    """Why the sandbox stopped the code ('' when it ended by itself)."""
    outcome, limits = ran.outcome, service.sandbox.limits
    if outcome.memory_kills:
        return (
            f"[Stopped: the call used more than its {limits.memory_mb} MiB of memory (all its "
            f"processes together); {outcome.memory_kills} of its processes were killed.]"
        )
    if outcome.timed_out:
        return f"[Stopped: the code ran past the {limits.timeout:g} s time limit.]"
    if outcome.signal == signal.SIGXCPU:
        return f"[Stopped: the code used up its {limits.cpu_seconds} s of CPU time.]"
    if outcome.signal == signal.SIGKILL:
        return "[Stopped: the code was killed (SIGKILL): by a limit of the sandbox, or itself.]"
    if outcome.signal is not None:
        return f"[Stopped by signal {signal.Signals(outcome.signal).name}.]"
    return ""
