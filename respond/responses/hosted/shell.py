"""The hosted shell family: the model's shell commands run by respond in a container of
code_interpreter's sandbox, inside the response.

A request's `{"type": "shell", "environment": {"type": "container_auto", "file_ids": [...]}}`
(a new container, made at the first call with copies of those files) or
`{"environment": {"type": "container_reference", "container_id": "cntr_..."}}` (one of the
tenant's containers) becomes one hosted tool the model sees as the function
`shell(commands)`. A call's commands run in order, each under `/bin/sh -c` in /mnt/data, in
one sandboxed run under its limits (docs/tools.md#the-sandbox); the call becomes a
`shell_call` item followed by its `shell_call_output` (each command's stdout, stderr and
exit code, or a timeout), and what they printed joins the context for the next turn.
Files written to /mnt/data stay in the container. A `shell` with no environment (or
`local`) is the client's (kinds/shell_call.py). Without `--code-interpreter` the tool is
accepted and not run: the model does not see it (logged once).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from respond._ids import new_id
from respond.containers import ContainerService, Ran, SandboxError
from respond.protocol.errors import APIError
from respond.protocol.tools import ShellTool
from respond.responses.hosted._base import Hosted, refuse_named_function
from respond.responses.hosted._containers import InContainer, held_container, new_container_files
from respond.responses.hosted._toolset import Request
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds.shell_call import (
    HOSTED,
    HOSTED_PARAMETERS,
    NAME,
    hosted,
    output_text,
)

__all__ = ["HostedShell"]

log = logging.getLogger("respond.tools")

AUTO_NAME = "shell (auto)"
# Characters of one command's stdout, and of its stderr, kept (less when the model asks,
# with the action's max_output_length).
MAX_STREAM = 16 * 1024
DESCRIPTION = (
    "Run shell commands in a sandboxed Linux container without network access, in order, "
    "each with /bin/sh in /mnt/data, which holds the user's files; files written there are "
    "kept. Returns each command's output and exit code."
)
_MARK = "@@respond-shell@@ "  # starts the line of one command (printable: output is cleaned)
# The Python the sandbox runs for one call: each command under /bin/sh, its output and
# how it ended printed as one marked JSON line, within the call's time (what is left of it).
_DRIVER = """
import json, subprocess, time
deadline = time.monotonic() + {seconds!r}
for command in {commands!r}:
    left = min(max(deadline - time.monotonic(), 0.1), {each!r})
    try:
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=left)
        out, err = done.stdout, done.stderr
        outcome = {{"type": "exit", "exit_code": done.returncode}}
    except subprocess.TimeoutExpired as expired:
        out, err, outcome = expired.stdout or b"", expired.stderr or b"", {{"type": "timeout"}}
    text = [b.decode("utf-8", "replace") for b in (out, err)]
    cut = [t[:{keep}] + ("\\n[cut]" if len(t) > {keep} else "") for t in text]
    line = {{"stdout": cut[0], "stderr": cut[1], "outcome": outcome}}
    print({mark!r} + json.dumps(line), flush=True)
    if outcome["type"] == "timeout":
        break
"""
_OFF = "this server runs no containers (start respond with --code-interpreter)"
_OFF_LOGGED: list[bool] = []


class HostedShell:
    """Makes the hosted shell tool of a request (when the server runs code)."""

    def __init__(self, service: ContainerService | None = None) -> None:
        self.service = service

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.service is not None:
            return tools
        return [tool for tool in tools if not _hosted_wire(tool)]

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The request's hosted shell tool, forced when `tool_choice` is {"type": "shell"}.
        Its container is checked now (a missing one is a 404, an expired one a 400)."""
        body, tenant = request.body, request.tenant
        found = [(i, t) for i, t in enumerate(body.tools) if isinstance(t, ShellTool) and hosted(t)]
        choice = body.tool_choice
        forced = bool(found) and isinstance(choice, dict) and choice.get("type") == "shell"
        if not found:
            return Hosted()
        if self.service is None:
            if forced:
                raise APIError(400, f"tool_choice names shell, but {_OFF}.", param="tool_choice")
            if not _OFF_LOGGED:
                _OFF_LOGGED.append(True)
                log.info("hosted shell tools are not run: %s", _OFF)
            return Hosted()
        if len(found) > 1 or any(isinstance(t, ShellTool) and not hosted(t) for t in body.tools):
            raise APIError(400, "Give at most one shell tool.", param=f"tools[{found[-1][0]}]")
        index, tool = found[0]
        where = f"tools[{index}].environment"
        refuse_named_function(body.tools, NAME, "shell", f"tools[{index}]")
        executor = await self._executor(tool.environment, where, tenant)
        shell = HostedTool(
            visible=NAME,
            server_label="shell",
            name=NAME,
            description=DESCRIPTION,
            parameters=HOSTED_PARAMETERS,
            needs_approval=False,
            executor=executor,
            family="shell",
            container_id=executor.container_id,
        )
        return Hosted(tools={NAME: shell}, forced=(NAME,) if forced else None)

    async def _executor(
        self, environment: dict[str, Any], where: str, tenant: str | None
    ) -> _Executor:
        service = self.service
        assert service is not None
        if environment["type"] == "container_reference":
            container = environment.get("container_id")
            if not isinstance(container, str) or not container:
                raise APIError(400, "'container_id' must name a container.", param=where)
            await held_container(service, tenant, container, f"{where}.container_id")
            return _Executor(service, tenant, container, None)
        files = environment.get("file_ids")
        file_ids = await new_container_files(service, tenant, files, f"{where}.file_ids")
        return _Executor(service, tenant, new_id("cntr"), file_ids)


def _hosted_wire(tool: dict[str, Any]) -> bool:
    environment = tool.get("environment")
    return (
        tool.get("type") == "shell"
        and isinstance(environment, dict)
        and environment.get("type") in HOSTED
    )


class _Executor(InContainer):
    auto_name = AUTO_NAME

    async def call(self, name: str, arguments: str) -> CallResult:
        try:
            args = json.loads(arguments)
            commands = args["commands"]
        except (ValueError, KeyError, TypeError):
            args, commands = {}, None
        if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
            error = {"type": "invalid_arguments", "message": "shell needs 'commands'."}
            return CallResult(error=error, outputs=[])
        # The sandbox's limit bounds the call; the model may ask for less, per command.
        seconds = max(self.service.sandbox.limits.timeout - 1, 0.5)
        each = _positive(args.get("timeout_ms"), seconds * 1000) / 1000
        keep = int(_positive(args.get("max_output_length"), MAX_STREAM))
        driver = _DRIVER.format(
            seconds=seconds, each=each, commands=commands, keep=keep, mark=_MARK
        )
        try:
            ran = await self.run_in_container(driver)
        except (APIError, SandboxError) as exc:
            # The container went (deleted, expired) or the sandbox failed: every command
            # is reported unrun, and the model is told why.
            message = exc.message if isinstance(exc, APIError) else str(exc)
            chunks = [_unrun(message) for _ in commands]
            return CallResult(output=output_text(chunks), outputs=chunks)
        chunks = _chunks(ran, len(commands))
        text = output_text(chunks)
        if ran.written:
            text += "\nFiles written: " + ", ".join(str(f["path"]) for f in ran.written)
        return CallResult(
            output=text,
            outputs=chunks,
            written=tuple((self.container_id, f["id"], str(f["path"])) for f in ran.written),
        )


def _chunks(ran: Ran, commands: int) -> list[dict[str, Any]]:
    """Each command's chunk, from the driver's marked lines; a command the sandbox stopped
    before it reported (its time, its memory) timed out, with what the sandbox said."""
    chunks: list[dict[str, Any]] = []
    stray: list[str] = []
    for line in ran.outcome.output.splitlines():
        chunk = _chunk(line)
        if chunk is None:
            stray.append(line)
        else:
            chunks.append(chunk)
    if len(chunks) < commands and (ran.outcome.timed_out or ran.outcome.signal is not None):
        note = "\n".join(stray).strip() or "[Stopped by the sandbox's limits.]"
        chunks.append({"stdout": "", "stderr": note, "outcome": {"type": "timeout"}})
    return chunks


def _positive(value: Any, most: float) -> float:
    """`value` when it is a positive integer below `most`, else `most`."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < most:
        return value
    return most


def _chunk(line: str) -> dict[str, Any] | None:
    """A command's chunk, from its marked line (None: another line, or one cut short by the
    sandbox's output limit)."""
    if not line.startswith(_MARK):
        return None
    try:
        chunk = json.loads(line.removeprefix(_MARK))
    except ValueError:
        return None
    return chunk if isinstance(chunk, dict) else None


def _unrun(message: str) -> dict[str, Any]:
    return {"stdout": "", "stderr": message, "outcome": {"type": "exit", "exit_code": 127}}
