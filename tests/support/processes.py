"""Every process the tests start: each in a process group of its own, all stopped at the end.

`spawn` starts a program in a new session, so stopping its group also stops whatever it
started (nginx's workers, a server's helpers). conftest.py calls `stop_all` when the session
ends, after every fixture's teardown: anything still running then was left by a test that did
not stop what it started, and the session fails saying which.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

__all__ = ["children", "spawn", "stop", "stop_all"]

_started: list[subprocess.Popen[bytes]] = []


def spawn(
    command: Sequence[str], *, log: IO[bytes], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    _started.append(process)
    return process


def children() -> list[int]:
    """The live processes whose parent is this one."""
    return [pid for pid, ppid, _pgrp in _live() if ppid == os.getpid()]


def _group_alive(process: subprocess.Popen[bytes]) -> bool:
    """A live (not zombie) process is still in the group: read from /proc, since a zombie
    that init has not reaped yet still answers a signal."""
    return any(pgrp == process.pid for _pid, _ppid, pgrp in _live())


def _live() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, process group) of each process that is not a zombie."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after ")".
            state, ppid, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
            if state != "Z":
                yield int(stat.parent.name), int(ppid), int(pgrp)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def stop(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM to the whole group, then SIGKILL to what is left after `timeout`."""
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
    if _group_alive(process):  # the leader is gone, a child of it is not
        _signal_group(process, signal.SIGKILL)


def stop_all() -> list[str]:
    """Stop every process still running that a test started; what was still running."""
    left = []
    for process in _started:
        if process.poll() is None or _group_alive(process):
            left.append(f"pid {process.pid}: {' '.join(map(str, process.args))}"[:300])  # type: ignore[arg-type]
            stop(process, timeout=5)
    _started.clear()
    return left
