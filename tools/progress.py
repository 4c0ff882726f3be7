"""Run a long install command and show real progress: its build steps and the time taken.

    python3 tools/progress.py LOG -- COMMAND...

pip only says "still running..." while llama-cpp-python compiles; run as `pip -v`, the
compiler's steps (ninja's "[12/180]") come through here as a line every few seconds, with
the elapsed time. pip's own headline lines are kept; everything goes to LOG, whose tail
is shown if the command fails. Exits with the command's status.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from typing import IO

STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
HEADLINES = re.compile(
    r"^(Collecting|Building wheel|Building editable|Created wheel|Successfully|"
    r"Installing collected|Using cached|ERROR|error:|fatal)"
)
# At most one step line this often (the environment variable lets a test see every step).
EVERY_SECONDS = float(os.environ.get("PROGRESS_EVERY_SECONDS", "5"))
QUIET_SECONDS = 20.0  # say how long it has been when nothing else was shown


def elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def main(argv: list[str]) -> int:
    log_path, command = argv[0], argv[argv.index("--") + 1 :]
    started = shown = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    with open(log_path, "w") as log:
        while True:
            try:
                line = lines.get(timeout=QUIET_SECONDS)
            except queue.Empty:  # one long compiler step: still say how long it has been
                line = ""
            if line is None:
                break
            log.write(line)
            now = time.monotonic()
            step = STEP.match(line)
            if step and now - shown >= EVERY_SECONDS:
                print(f"    compiling: step {step[1]}/{step[2]} ({elapsed(started)})", flush=True)
                shown = now
            elif HEADLINES.match(line.lstrip()):
                print(f"  {line.strip()}", flush=True)
                shown = now
            elif now - shown >= QUIET_SECONDS:
                print(f"    ... working ({elapsed(started)})", flush=True)
                shown = now
    status = process.wait()
    if status == 0:
        print(f"  done in {elapsed(started)}")
        return 0
    with open(log_path) as log:
        sys.stdout.write("".join(log.readlines()[-60:]))
    print(f"  failed after {elapsed(started)}; the whole output is in {log_path}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
