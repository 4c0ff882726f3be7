"""What a test starts is stopped with everything it started in turn."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support import processes


def test_children_are_this_process_children_alone(tmp_path: Path) -> None:
    # What a SIGTERM is passed on to (tests/conftest.py): a worker, not what it started.
    pids = tmp_path / "pids"
    with (tmp_path / "log").open("wb") as log:
        process = processes.spawn(["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"], log=log)
    try:
        deadline = time.monotonic() + 10
        while not pids.exists() or not pids.read_text().strip():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        found = processes.children()
        assert process.pid in found and int(pids.read_text()) not in found
    finally:
        processes.stop(process, timeout=1)
    assert process.pid not in processes.children()


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with (tmp_path / "log").open("wb") as log:
        # A parent that ignores SIGTERM and a child of its own: terminate() alone leaves both.
        script = f"trap '' TERM; sleep 300 & echo $! > {pids}; wait"
        process = processes.spawn(["sh", "-c", script], log=log)
    deadline = time.monotonic() + 10
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int(pids.read_text())
    processes.stop(process, timeout=1)
    assert process.poll() is not None
    deadline = time.monotonic() + 5
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its stopped parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: it only waits for its parent (init here) to reap it.
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status
