"""Ending every process of a sandbox user (respond as root: each running call has a uid of
its own). Standard library only: the bootstrap (`_boot.py`) uses it as well as the server."""

from __future__ import annotations

import contextlib
import os
import signal
import time

POLL_SECONDS = 0.01


def kill_all(uid: int, seconds: float) -> bool:
    """Kill every process whose real uid is `uid` (one that left the call's session too)
    until none is left, for at most `seconds`; whether none is left. kill(-1) as that user
    cannot tell when it is done (it succeeds while any other process exists), so /proc is
    read instead."""
    deadline = time.monotonic() + seconds
    while pids := processes_of(uid):
        if time.monotonic() >= deadline:
            return False
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(POLL_SECONDS)
    return True


def processes_of(uid: int) -> list[int]:
    """The live processes whose real uid is `uid`, from /proc/<pid>/status (a process that
    made itself undumpable has a /proc folder owned by root, whoever it runs as). Zombies
    are left out: they run nothing, and only their parent can reap them."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _real_uid(entry.path) == uid:
            found.append(int(entry.name))
    return found


def _real_uid(folder: str) -> int | None:
    """The process's real uid; None for a zombie or a process gone meanwhile."""
    try:
        with open(f"{folder}/status") as status:
            for line in status:
                if line.startswith("State:") and line.split()[1] == "Z":
                    return None
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None
