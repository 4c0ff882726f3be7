"""tools/progress.py: a long build shows its steps and elapsed time, and keeps its exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "progress.py"
# A stand-in for `pip wheel -v`: pip headlines, ninja steps, noise, then an exit status.
BUILD = """
import sys, time
print("Collecting llama-cpp-python==0.3.36", flush=True)
for step in range(1, 5):
    print(f"[{step}/4] Building CXX object ggml.o", flush=True)
    print("  -- some compiler noise", flush=True)
    time.sleep(0.05)
print("Successfully built llama-cpp-python", flush=True)
sys.exit(int(sys.argv[1]))
"""


def run(tmp_path: Path, status: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(TOOL), str(tmp_path / "build.log")]
    command += ["--", sys.executable, "-c", BUILD, str(status)]
    env = {**os.environ, "PROGRESS_EVERY_SECONDS": "0"}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def test_steps_and_time_are_shown_and_noise_is_kept_in_the_log(tmp_path: Path) -> None:
    done = run(tmp_path, 0)
    assert done.returncode == 0
    shown = done.stdout.splitlines()
    assert shown[0] == "  Collecting llama-cpp-python==0.3.36"
    assert any(line.startswith("    compiling: step 4/4 (0m0") for line in shown)
    assert "  Successfully built llama-cpp-python" in shown
    assert shown[-1].startswith("  done in 0m0")
    assert not any("noise" in line for line in shown)
    assert (tmp_path / "build.log").read_text().count("compiler noise") == 4


def test_a_failed_build_shows_its_tail_and_keeps_the_status(tmp_path: Path) -> None:
    done = run(tmp_path, 3)
    assert done.returncode == 3
    assert "compiler noise" in done.stdout  # the log's tail, to see what went wrong
    assert done.stdout.splitlines()[-1].startswith("  failed after 0m0")
