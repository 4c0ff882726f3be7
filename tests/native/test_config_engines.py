"""respond.toml's embedded models as the engines they build (LlamaCppEngine: llama.cpp)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from respond._config_file import EmbeddedModel, load_config


def write(tmp: Path, text: str) -> Path:
    path = tmp / "respond.toml"
    path.write_text(text)
    return path


def test_a_model_with_another_chat_template(tmp_path: Path) -> None:
    """`chat_template_file` gives an embedded model another template than its GGUF's; the
    engine is built with it, as `--chat-template-file` builds the -m model."""
    from respond._config import Settings
    from respond._registry import build_engines
    from respond.engines.llamacpp import LlamaCppEngine

    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    path = write(tmp_path, f'[models.a]\ngguf = "bundled"\nchat_template_file = "{template}"\n')
    (model,) = load_config(path)
    assert model == EmbeddedModel(alias="a", gguf=None, chat_template_file=template)
    for settings in (Settings(config_path=path), Settings(chat_template_file=template)):
        (engine,) = build_engines(settings).values()
        assert isinstance(engine, LlamaCppEngine) and engine.chat_template_file == template


def test_a_missing_chat_template_file_stops_serve_naming_it(tmp_path: Path) -> None:
    from respond._config import Settings
    from respond._registry import build_engines

    with pytest.raises(SystemExit, match=re.escape("chat template file not found: /nope.jinja")):
        build_engines(Settings(chat_template_file=Path("/nope.jinja")))
