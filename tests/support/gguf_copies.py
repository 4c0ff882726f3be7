"""Copies of the bundled GGUF with another chat template, as a user makes one.

`gguf-new-metadata --chat-template-file` (the gguf package's own script, installed with
llama-cpp-python's dependencies) rewrites the metadata and copies the weights: the bundled
SmolLM2 then serves with, say, Kimi K3's template, which is what the template code meets
when someone serves that model.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from respond.engines.llamacpp._engine import bundled_model_path

__all__ = ["with_template"]


def with_template(template: str, folder: Path, name: str) -> Path:
    """A copy of the bundled GGUF in `folder` whose chat template is `template`."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{name}.jinja"
    source.write_text(template)
    copy = folder / f"{name}.gguf"
    subprocess.run(
        [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--chat-template-file",
         str(source), str(bundled_model_path()), str(copy)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return copy
