"""The hosted shell: `shell` tools with a container environment, run by respond in
code_interpreter's real sandbox (namespaces), inside the response.

Most tests run `Responses` over a real ContainerService (SQLite store, the real sandbox)
with the FAKE ScriptedEngine making the calls, since what a real model writes cannot be
chosen: the commands' stdout, stderr, exit codes, a timeout, the output cut, files kept
between calls and responses, another tenant's container refused. The last one runs the
real server and bundled model: a forced shell call comes back as a shell_call and its
shell_call_output in the same response.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond.containers import ContainerService, Limits, Sandbox
from respond.engines import _base as d
from respond.engines.llamacpp import BUNDLED_ALIAS
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.responses.hosted import families
from respond.responses.hosted.shell import MAX_STREAM
from respond.responses.run import PreparedRun, Responses
from respond.store.containers import ContainerStore
from respond.store.files import FileStore
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine
from tests.support.schema import validate_event
from tests.support.server import Server, start_server
from tests.support.sse import stream_events

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

LIMITS = Limits(timeout=4, cpu_seconds=10, memory_mb=512, disk_mb=16, processes=16)
END: list[d.Delta] = [d.Usage(input_tokens=5, output_tokens=3), d.Finish("stop")]
AUTO = {"type": "shell", "environment": {"type": "container_auto"}}


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ContainerService]:
    sql = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=100)
    await sql.open()
    state = tmp_path / "containers"
    sandbox = Sandbox.make("namespaces", LIMITS, state, python=sys.executable)
    yield ContainerService(
        ContainerStore(sql), FileStore(sql), sandbox, state, max_file_bytes=1 << 20
    )
    await sql.close()


def shell(*commands: str, **limits: int) -> list[d.Delta]:
    arguments = json.dumps({"commands": list(commands), **limits})
    return [
        d.ToolCallStart(call_id="c1", name="shell"),
        d.ToolCallArgumentsDelta(arguments),
        d.ToolCallEnd(),
        *END,
    ]


def answer(text: str) -> list[d.Delta]:
    return [d.TextDelta(text), *END]


async def respond(
    service: ContainerService,
    scripts: list[list[d.Delta]],
    tool: dict[str, Any],
    tenant: str = "t1",
) -> tuple[PreparedRun, ScriptedEngine]:
    engine = ScriptedEngine(scripts)
    responses = Responses({engine.info.id: engine}, hosted=families(containers=service))
    body = {"model": engine.info.id, "input": "Go.", "tools": [tool], "tool_choice": "required"}
    run = await responses.prepare(CreateResponseBody.model_validate(body), tenant=tenant)
    async for _ in responses.events(run):
        pass
    return run, engine


def items(run: PreparedRun) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json") for item in run.builder.response.output]


async def test_commands_run_in_a_new_container_with_their_output(
    service: ContainerService,
) -> None:
    scripts = [
        shell("echo hi > note.txt", "cat note.txt", "ls /nope"),
        answer("Wrote note.txt."),
    ]
    run, engine = await respond(service, scripts, AUTO)
    call, output, message = items(run)
    assert run.builder.response.status == "completed"
    assert call["type"] == "shell_call" and call["status"] == "completed"
    assert call["action"]["commands"] == ["echo hi > note.txt", "cat note.txt", "ls /nope"]
    container = call["environment"]["container_id"]
    assert call["environment"]["type"] == "container_reference" and container.startswith("cntr_")
    assert output["type"] == "shell_call_output" and output["call_id"] == call["call_id"]
    first, second, third = output["output"]
    assert first == {"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    assert second["stdout"] == "hi\n" and second["outcome"]["exit_code"] == 0
    assert "nope" in third["stderr"] and third["outcome"]["exit_code"] != 0
    told = str(engine.turns[1].messages[-1].content)
    assert "hi\n(exit code 0)" in told and "Files written: /mnt/data/note.txt" in told
    (cited,) = message["content"][0]["annotations"]
    assert cited["type"] == "container_file_citation" and cited["container_id"] == container
    assert (await service.get("t1", container)) is not None


async def test_a_container_reference_keeps_its_files_for_later_responses(
    service: ContainerService,
) -> None:
    box = await service.create("t1", "box")
    tool = {
        "type": "shell",
        "environment": {"type": "container_reference", "container_id": box["id"]},
    }
    await respond(service, [shell("echo kept > kept.txt"), answer("Done.")], tool)
    run, _ = await respond(service, [shell("cat kept.txt"), answer("It says kept.")], tool)
    call, output, _ = items(run)
    assert call["environment"]["container_id"] == box["id"]
    assert output["output"][0]["stdout"] == "kept\n"
    with pytest.raises(APIError) as refused:
        await respond(service, [], tool, tenant="t2")
    assert refused.value.status == 404
    assert refused.value.param == "tools[0].environment.container_id"


async def test_a_command_past_the_time_limit_times_out(service: ContainerService) -> None:
    run, _ = await respond(
        service, [shell("echo before", "sleep 30", "echo never"), answer("Slow.")], AUTO
    )
    _, output, _ = items(run)
    chunks = output["output"]
    assert chunks[0]["stdout"] == "before\n"
    assert chunks[-1]["outcome"] == {"type": "timeout"} and len(chunks) == 2


async def test_long_output_is_cut(service: ContainerService) -> None:
    run, _ = await respond(service, [shell("yes a | head -c 40000"), answer("Long.")], AUTO)
    _, output, _ = items(run)
    (chunk,) = output["output"]
    assert chunk["stdout"].endswith("\n[cut]") and len(chunk["stdout"]) == MAX_STREAM + 6


async def test_the_calls_own_limits_are_honoured(service: ContainerService) -> None:
    script = shell("yes a | head -c 100", "sleep 3", max_output_length=10, timeout_ms=1000)
    run, _ = await respond(service, [script, answer("Cut.")], AUTO)
    call, output, _ = items(run)
    assert call["action"] == {
        "commands": ["yes a | head -c 100", "sleep 3"],
        "timeout_ms": 1000,
        "max_output_length": 10,
    }
    first, second = output["output"]
    assert first["stdout"] == "a\na\na\na\na\n\n[cut]" and output["max_output_length"] == 10
    assert second["outcome"] == {"type": "timeout"}


async def test_a_client_shell_stays_the_clients(service: ContainerService) -> None:
    run, _ = await respond(service, [shell("ls")], {"type": "shell"})
    (call,) = items(run)
    assert call["type"] == "shell_call" and "environment" not in call


# ------------------------------------------------------------ the real server and model


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("hosted-shell"))
    srv = start_server(tmp, "--threads", "2", "--code-interpreter")
    yield srv
    srv.stop()


def test_a_forced_hosted_shell_call_runs_in_the_same_response(server: Server) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "instructions": "Run the user's shell command with the shell tool.",
        "input": "echo hello",
        "tools": [AUTO],
        "tool_choice": {"type": "shell"},
        "max_output_tokens": 120,
        "temperature": 0,
        "stream": True,
    }
    events = stream_events(f"{server.base_url}/responses", body, 900)
    for event in events:
        validate_event(event)
    final = events[-1]["response"]
    kinds = [item["type"] for item in final["output"]]
    assert kinds[:2] == ["shell_call", "shell_call_output"], kinds
    call, output = final["output"][:2]
    assert call["environment"]["container_id"].startswith("cntr_")
    assert len(output["output"]) == len(call["action"]["commands"])
    stored = httpx.get(f"{server.base_url}/responses/{final['id']}", timeout=60).json()
    assert [item["type"] for item in stored["output"]] == kinds
