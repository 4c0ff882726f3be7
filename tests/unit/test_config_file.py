"""respond.toml: what a valid file builds, and errors that name the key at fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from respond._config import Timeouts
from respond._config_file import (
    ConfigError,
    EmbeddedModel,
    EmbeddingsUpstream,
    UpstreamModel,
    load_config,
    load_embeddings_config,
)

EXAMPLE = """
[models.qwen]
upstream = ["http://gpu-a:8000/v1/", "http://gpu-b:8000/v1"]
api = "chat"
model = "Qwen/Qwen3-8B"
api_key_env = "TEST_RESPOND_KEY"
max_tokens_param = "max_completion_tokens"
timeouts = { connect = 2, first_byte = 30, idle = 10 }
forced_calls = "native"
context_window = 32768

[models.local]
gguf = "bundled"
ctx_size = 2048
cache_ram = 0
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "respond.toml"
    path.write_text(text)
    return path


def test_example_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_RESPOND_KEY", "sk-test")
    qwen, local = load_config(write(tmp_path, EXAMPLE))
    assert qwen == UpstreamModel(
        alias="qwen",
        urls=("http://gpu-a:8000/v1", "http://gpu-b:8000/v1"),
        api="chat",
        model="Qwen/Qwen3-8B",
        api_key="sk-test",
        timeouts=Timeouts(connect=2, first_byte=30, idle=10),
        max_tokens_param="max_completion_tokens",
        forced_calls="native",
        context_window=32768,
    )
    assert qwen.upstream_model == "Qwen/Qwen3-8B"
    assert local == EmbeddedModel(alias="local", gguf=None, ctx_size=2048, cache_ram=0)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[models.a]\nupstream = 'http://x/v1'\napi = 'grpc'\n", "models.a.api:"),
        ("[models.a]\nupstream = 'ftp://x'\n", "models.a.upstream:"),
        ("[models.a]\nupstream = ['http://x/v1', 3]\n", "models.a.upstream[1]:"),
        ("[models.a]\nupstream = 'http://x/v1'\ntimeout = 3\n", "models.a.timeout:"),
        (
            "[models.a]\nupstream = 'http://x/v1'\ntimeouts = { idle = -1 }\n",
            "models.a.timeouts.idle:",
        ),
        ("[models.a]\nupstream = 'http://x/v1'\nforced_calls = 'yes'\n", "models.a.forced_calls:"),
        ("[models.a]\nupstream = 'http://x/v1'\ncontext_window = 0\n", "context_window:"),
        ("[models.a]\ngguf = '/nope.gguf'\n", "models.a.gguf:"),
        (
            "[models.a]\ngguf = 'bundled'\nchat_template_file = '/nope.jinja'\n",
            "models.a.chat_template_file: file not found",
        ),
        ("[models.a]\ngguf = 'bundled'\nchat_template_file = 3\n", "models.a.chat_template_file:"),
        ("[models.a]\ngguf = 'bundled'\ncache_ram = -1\n", "models.a.cache_ram:"),
        ("[models.a]\ngguf = 'bundled'\nupstream = 'http://x/v1'\n", "models.a:"),
        ("[models.a]\ngguf = 'bundled'\nhf = 'owner/name'\n", "models.a:"),
        ("[models.a]\nhf = 'name:Q8_0'\n", "models.a.hf: invalid repo 'name:Q8_0'"),
        ("[models.a]\ngguf = 'bundled'\nhf_file = 'a.gguf'\n", "models.a.hf_file:"),
        ("[models.a]\nupstream = 'http://x/v1'\napi_key_env = 'UNSET_RESPOND_X'\n", "api_key_env"),
        ("[server]\nport = 1\n", "server:"),
        ("", "models:"),
        ("[models.a\n", "not valid TOML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert key in str(caught.value)
    assert str(tmp_path / "respond.toml") in str(caught.value)


def test_a_model_from_the_hub(tmp_path: Path) -> None:
    text = "[models.qwen]\nhf = 'unsloth/Qwen3-8B-GGUF:Q8_0'\nctx_size = 8192\n"
    [qwen] = load_config(write(tmp_path, text))
    assert qwen == EmbeddedModel(
        alias="qwen", gguf=None, hf="unsloth/Qwen3-8B-GGUF:Q8_0", ctx_size=8192
    )
    text = "[models.qwen]\nhf = 'unsloth/Qwen3-8B-GGUF'\nhf_file = 'q/Qwen3-8B-F16.gguf'\n"
    [qwen] = load_config(write(tmp_path, text))
    assert isinstance(qwen, EmbeddedModel) and qwen.hf_file == "q/Qwen3-8B-F16.gguf"


def test_serve_refuses_a_bad_file_naming_the_key(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path, "[models.a]\nupstream = 'http://x/v1'\ntimeouts = { idle = 'soon' }\n")
    done = subprocess.run(
        [sys.executable, "-m", "respond", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "models.a.timeouts.idle: must be a positive number of seconds" in done.stderr


def test_the_embeddings_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[embeddings]\nupstream = 'http://gpu:8000/v1/'\nmodel = 'BAAI/bge-m3'\n"
        "name = 'bge'\napi_key = 'k'\ntimeout = 5\nmax_chars = 2000\nstart_wait = 300\n",
    )
    assert load_config(path) == []  # the models come from the command line
    assert load_embeddings_config(path) == EmbeddingsUpstream(
        url="http://gpu:8000/v1",
        model="BAAI/bge-m3",
        name="bge",
        api_key="k",
        timeout=5.0,
        max_chars=2000,
        start_wait=300.0,
    )
    plain = write(tmp_path, "[embeddings]\nupstream = 'http://gpu/v1'\nmodel = 'm'\n")
    assert load_embeddings_config(plain) == EmbeddingsUpstream(
        url="http://gpu/v1", model="m", name="m"
    )
    assert load_embeddings_config(None) is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[embeddings]\nupstream = 'x'\nmodel = 'm'\n", "embeddings.upstream:"),
        ("[embeddings]\nupstream = 'http://x/v1'\n", "embeddings.model:"),
        (
            "[embeddings]\nupstream = 'http://x/v1'\nmodel = 'm'\ntimeout = 0\n",
            "embeddings.timeout:",
        ),
        (
            "[embeddings]\nupstream = 'http://x/v1'\nmodel = 'm'\nstart_wait = -1\n",
            "embeddings.start_wait:",
        ),
        ("[embeddings]\nupstream = 'http://x/v1'\nmodel = 'm'\npool = 1\n", "embeddings.pool:"),
        (
            "[embeddings]\nupstream = 'http://x/v1'\nmodel = 'm'\nmax_chars = 0\n",
            "embeddings.max_chars:",
        ),
    ],
)
def test_embeddings_errors_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_embeddings_config(write(tmp_path, text))
    assert key in str(caught.value)
