"""`respond serve` exits without the interpreter's teardown (respond/cli.py's `_exit_now`),
but with everything a normal exit does that matters: another thread's work finished, the
atexit handlers run, buffered output and logs written, status 0."""

from __future__ import annotations

import os
import subprocess
import sys

PROGRAM = """
import atexit, logging, sys, threading, time
from respond.cli import _exit_now

logging.basicConfig(stream=sys.stderr, level=logging.INFO)
atexit.register(lambda: print("atexit ran"))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
sys.stdout.write("buffered ")
logging.getLogger("t").info("logged")
_exit_now()
print("never")
"""


def test_exit_now_finishes_what_a_normal_exit_finishes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # pipes buffer
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["buffered", "thread", "done", "atexit", "ran"], done.stdout
    assert "INFO:t:logged" in done.stderr
