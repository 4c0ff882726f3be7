"""Sandbox limits per call and per tenant, not per process (issue #32, item 7).

Both sandbox modes, each a respond server of its own (`build_server` with
--code-interpreter, the real sandbox, its SQLite store, two tenants from an --api-key-file)
over real HTTP in this process; each tenant's code is written by a scripted engine of its
own, so that the two tenants' calls can run at once. A call whose four children hold
400 MiB each under a 1 GiB limit is stopped, saying so, where respond can make a memory
cgroup (the start-up log says which limit applies, and the test expects that one); one
tenant holding every process its call may have does not make another's `subprocess.run`
fail, and cannot reach the other's processes or folder.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses.tool_param import CodeInterpreterContainer

from respond import Settings, build_server
from respond.containers import SandboxMode, _cgroup
from respond.containers._sandbox import FIRST_UID, USERS
from respond.testing import ScriptedEngine
from tests.support.clients import openai_client
from tests.support.code_calls import call_logs, run_code
from tests.support.inproc import serving_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

ROOT = os.geteuid() == 0
MEMORY_MB = 1024
DISK_MB = 256
PROCESSES = 12
AUTO: CodeInterpreterContainer = {"type": "auto"}
ENGINES = {"scripted": ScriptedEngine(name="scripted")}  # for servers only started

# Four children, each touching 400 MiB, alive together: 1.6 GiB in all.
FOUR_CHILDREN = """\
import os, time
kids = []
for n in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(400 << 20)
        for at in range(0, len(block), 4096):
            block[at] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print("ended", sorted(os.waitpid(pid, 0)[1] for pid in kids))
"""

# Every process the call's user may have, held for a while; one of them in a session of
# its own (limits-only kills the call's session at its end: this one must die too).
HOLD_EVERY_PROCESS = """\
import subprocess, time
held = [subprocess.Popen(["sleep", "60"], start_new_session=True)]
while True:
    try:
        held.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        break
print("held", len(held))
time.sleep(6)
"""

# Another tenant's processes (another sandbox user): their folders must stay closed.
RUN_AND_PEEK = """\
import os, subprocess
print("true", subprocess.run(["true"]).returncode)
others = readable = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        continue
    real = int(status.split("Uid:")[1].split()[0])
    if real != os.getuid() and FIRST <= real < FIRST + USERS:
        others += 1
        try:
            os.listdir(f"/proc/{pid}/cwd")
            readable += 1
        except OSError:
            pass
print("others", others, "readable", readable)
"""


@dataclass(frozen=True)
class Tenant:
    engine: ScriptedEngine
    client: openai.OpenAI


@dataclass(frozen=True)
class Served:
    mode: str
    data_dir: Path
    alpha: Tenant
    beta: Tenant


@pytest.fixture(scope="module", params=["namespaces", "limits-only"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    base = Path(tmp_path_factory.mktemp(f"sandbox-limits-{request.param}"))
    keys = base / "keys"
    keys.write_text("alpha:key-alpha\nbeta:key-beta\n")
    engines = {name: ScriptedEngine(name=f"scripted-{name}") for name in ("alpha", "beta")}
    server = build_server(
        settings(request.param, base, keys),
        engines={e.info.id: e for e in engines.values()},
        banner=False,
    )
    with (
        serving_server(server) as url,
        openai_client(f"{url}/v1", api_key="key-alpha") as alpha,
        openai_client(f"{url}/v1", api_key="key-beta") as beta,
    ):
        yield Served(
            request.param,
            base / "data",
            Tenant(engines["alpha"], alpha),
            Tenant(engines["beta"], beta),
        )


def settings(mode: SandboxMode, base: Path, keys: Path) -> Settings:
    return Settings(
        data_dir=base / "data",
        embedding_model="none",
        api_key_file=keys,
        code_interpreter=True,
        code_interpreter_sandbox=mode,
        # As root the code runs as a sandbox user, who cannot run an interpreter under /root.
        code_interpreter_python="/usr/bin/python3" if ROOT else sys.executable,
        code_interpreter_timeout=25,
        code_interpreter_memory_mb=MEMORY_MB,
        code_interpreter_disk_mb=DISK_MB,
        code_interpreter_processes=PROCESSES,
    )


def run(tenant: Tenant, code: str, container: CodeInterpreterContainer | str = AUTO) -> Any:
    return run_code(tenant.client, tenant.engine, code, container)


def test_the_start_up_log_says_which_memory_limit_applies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alpha:key-alpha\n")
    with caplog.at_level(logging.INFO, logger="respond"):
        build_server(settings("namespaces", tmp_path, keys), engines=ENGINES, banner=False)
    said = [r.getMessage() for r in caplog.records if "memory limit" in r.getMessage()]
    memory = _cgroup.find()
    if isinstance(memory, _cgroup.Memory):
        assert said == [
            f"code_interpreter memory limit: {MEMORY_MB} MiB per call, its processes "
            f"together (and {DISK_MB} MiB for the files in its tmpfs), and {MEMORY_MB} MiB "
            f"of address space per process ({memory.describe()})"
        ]
    else:
        assert len(said) == 1 and "per process (RLIMIT_AS), not per call" in said[0]


def test_no_seccomp_list_for_the_machine_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's view of the machine only: the sandbox's own process still filters."""
    monkeypatch.setattr("platform.machine", lambda: "sparc64")
    keys = tmp_path / "keys"
    keys.write_text("alpha:key-alpha\n")
    with caplog.at_level(logging.WARNING, logger="respond"):
        build_server(settings("namespaces", tmp_path, keys), engines=ENGINES, banner=False)
    said = [r.getMessage() for r in caplog.records if "seccomp" in r.getMessage()]
    assert said == [
        "code_interpreter: no seccomp filter: respond has no system call list for sparc64 "
        "(only for aarch64, x86_64); code may make every system call the namespaces allow"
    ]


def test_memory_is_limited_for_the_whole_call(served: Served) -> None:
    """Four children of 400 MiB each under a 1 GiB limit: with a memory cgroup, the kernel
    kills some and the call says so; with RLIMIT_AS only (as the start-up log says), each
    child is within its own limit and all four end well. The container runs code after."""
    call = run(served.alpha, FOUR_CHILDREN)
    said = call_logs(call)
    if isinstance(_cgroup.find(), _cgroup.Memory):
        stopped = re.search(
            rf"\[Stopped: the call used more than its {MEMORY_MB} MiB of memory \(all its "
            r"processes together\); (\d+) of its processes were killed\.\]",
            said,
        )
        assert stopped and int(stopped[1]) >= 1, said
        assert call.status == "failed"
        assert "ended [0, 0, 0, 0]" not in said
    else:
        assert "ended [0, 0, 0, 0]" in said and "Stopped" not in said
    again = run(served.alpha, "print(6 * 7)", call.container_id)
    assert call_logs(again).strip() == "42"
    assert not _call_groups()


@pytest.mark.parametrize("mode", ["namespaces", "limits-only"])
def test_files_beyond_the_memory_limit_are_written_and_kept(
    mode: SandboxMode, tmp_path: Path
) -> None:
    """200 MiB of files under a 128 MiB memory limit (and a 256 MiB disk limit). In
    namespaces mode they are pages of the sandbox's tmpfs, which the kernel counts in the
    call's cgroup: the cgroup has room for them beside the memory, so they are written and
    copied back (without it, the kernel killed the code and then the sandbox's own process
    as it copied them back)."""
    keys = tmp_path / "keys"
    keys.write_text("alpha:key-alpha\n")
    engine = ScriptedEngine()
    limited = replace(settings(mode, tmp_path, keys), code_interpreter_memory_mb=128)
    server = build_server(limited, engines={engine.info.id: engine}, banner=False)
    code = (
        "with open('big', 'wb') as out:\n    for n in range(200):\n"
        "        out.write(b'x' * (1 << 20))\nprint('wrote', n + 1)"
    )
    with serving_server(server) as url, openai_client(f"{url}/v1", api_key="key-alpha") as sdk:
        call = run_code(sdk, engine, code, AUTO)
        assert call_logs(call).strip() == "wrote 200"
        files = sdk.containers.files.list(call.container_id).data
    assert [(f.path, f.bytes) for f in files] == [("/mnt/data/big", 200 << 20)]


def test_one_tenant_holding_every_process_does_not_starve_another(served: Served) -> None:
    """Tenant alpha's call holds all the processes a call may have while tenant beta's
    call runs a subprocess; as root each call is its own user, so beta's fork succeeds and
    beta cannot open alpha's processes' folders (or, limits-only, alpha's scratch folder)."""
    if not ROOT:
        pytest.skip("one sandbox user per call needs respond to run as root")
    held: list[Any] = []
    alpha = threading.Thread(target=lambda: held.append(run(served.alpha, HOLD_EVERY_PROCESS)))
    alpha.start()
    try:
        _wait_for_sleepers(PROCESSES - 1)
        scratch = _scratch_folders(served)
        pool = f"FIRST, USERS = {FIRST_UID}, {USERS}\n"
        peeked = call_logs(run(served.beta, pool + RUN_AND_PEEK))
    finally:
        alpha.join(timeout=60)
    assert "true 0" in peeked, peeked
    others, readable = map(int, re.findall(r"others (\d+) readable (\d+)", peeked)[0])
    assert readable == 0
    if served.mode == "limits-only":
        assert others >= PROCESSES - 1  # it sees them, and can open none
        assert [
            (FIRST_UID <= info.st_uid < FIRST_UID + USERS, stat.S_IMODE(info.st_mode))
            for info in scratch
        ] == [(True, 0o700)]
    else:
        assert others == 0  # its own PID namespace
    assert f"held {PROCESSES - 1}" in call_logs(held[0])
    assert not _sandbox_processes()  # the one in a session of its own too


def _wait_for_sleepers(count: int) -> None:
    deadline = time.monotonic() + 30
    while len(_sandbox_processes()) < count:
        assert time.monotonic() < deadline, "the call did not start its processes"
        time.sleep(0.1)


def _sandbox_processes() -> list[int]:
    """The processes running as a sandbox user now (not zombies: they run nothing)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = int(status.split("Uid:")[1].split()[0])
        zombie = status.split("State:")[1].split()[0] == "Z"
        if FIRST_UID <= uid < FIRST_UID + USERS and not zombie:
            found.append(int(pid))
    return found


def _scratch_folders(served: Served) -> list[os.stat_result]:
    return [p.lstat() for p in (served.data_dir / "containers").glob("cntr_*.work")]


def _call_groups() -> list[Path]:
    """The calls' memory cgroups still there (each is removed after its call)."""
    memory = _cgroup.find()
    if not isinstance(memory, _cgroup.Memory):
        return []
    return list(memory.parent.glob("respond-call-*"))
