"""The namespaces sandbox's seccomp filter (#32 item 8), against the real sandbox.

Model-written code calls what a Python sandbox never needs through ctypes: each call fails
with EPERM, while what ordinary code does (threads, subprocesses) still works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from respond.containers import Limits, Sandbox
from respond.containers._seccomp import ARCHES, program

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

PROBE = r"""
import ctypes, errno, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def err(result):
    return "ok" if result == 0 else errno.errorcode[ctypes.get_errno()]
print("mount", err(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("ptrace", err(libc.ptrace(16, 1, 0, 0)))  # PTRACE_ATTACH to the sandbox's PID 1
print("unshare", err(libc.unshare(0x10000000)))  # CLONE_NEWUSER
print("setns", err(libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0)))
print("keyctl", err(libc.syscall(250 if os.uname().machine == "x86_64" else 219, 0, 0)))
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("run", subprocess.run(["echo", "fine"], capture_output=True, text=True).stdout.strip())
"""


async def test_the_namespaces_sandbox_refuses_what_python_never_needs(tmp_path: Path) -> None:
    limits = Limits(timeout=10, cpu_seconds=30, memory_mb=1024, disk_mb=16, processes=64)
    sandbox = Sandbox.make("namespaces", limits, tmp_path / "containers", python=sys.executable)
    folder = tmp_path / "containers" / "cntr_seccomp"
    folder.mkdir(parents=True)
    ran = await sandbox.run(PROBE, folder)
    assert ran.exit_code == 0, ran.output
    said = dict(line.split(" ", 1) for line in ran.output.splitlines())
    assert said == {
        "mount": "EPERM",
        "ptrace": "EPERM",
        "unshare": "EPERM",
        "setns": "EPERM",
        "keyctl": "EPERM",
        "run": "fine",
    }


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_every_refused_call_has_a_number_and_every_jump_fits(machine: str) -> None:
    insns = program(machine)
    assert insns is not None
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in insns)
    jumps = [(i, jt, jf) for i, (code, jt, jf, _) in enumerate(insns) if code & 0x07 == 0x05]
    assert all(i + 1 + max(jt, jf) < len(insns) for i, jt, jf in jumps)
    assert insns[-1][0] == insns[-2][0] == 0x06  # it ends in returns
    assert program("sparc") is None
