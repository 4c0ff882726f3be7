"""tests/unit runs on the lint install (no llama-cpp-python, no chat templates): `make unit`
needs no C++ build. Tests that need llama.cpp or the templates live in tests/native."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).parent

# As on the lint install: importing llama_cpp fails, whatever this venv holds.
PROBE = """
import importlib, sys
sys.modules["llama_cpp"] = None
for name in sys.argv[1:]:
    importlib.import_module(name)
"""


def test_every_unit_module_imports_without_llama_cpp() -> None:
    modules = [f"tests.unit.{path.stem}" for path in sorted(UNIT.glob("test_*.py"))]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        cwd=UNIT.parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        "a tests/unit module needs llama-cpp-python (move it to tests/native):\n"
        + done.stderr[-3000:]
    )
