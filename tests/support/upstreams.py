"""Upstream processes for respond to front: the fake, or llama-cpp-python's own server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import Server, free_port, start_server, wait_ok


def wait_models(server: Server) -> None:
    """Wait until GET /v1/models answers (these servers have no /health)."""
    wait_ok(server, f"{server.base_url}/models")


def start_fake(tmp: Path, name: str, *, port: int | None = None) -> Server:
    """The scripted FAKE upstream (tests/support/fake_upstream.py) in its own process.

    Pass the port of a stopped one to bring it back at the same address.
    """
    port = port or free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"fake-{name}-{port}.log"
    command = [sys.executable, "-m", "tests.support.fake_upstream", "--port", str(port)]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [*command, "--name", name],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    server = Server(process, port, log_path)
    wait_models(server)
    return server


def start_llama_cpp_server(tmp: Path, model: Path) -> Server:
    """llama-cpp-python's own OpenAI-compatible server: a real Chat Completions upstream."""
    server = start_server(
        tmp,
        "--model",
        str(model),
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
        # By default a new request interrupts the stream in progress; queue it instead.
        "--interrupt_requests",
        "False",
        module=("-m", "llama_cpp.server"),
        wait_ready=False,
    )
    wait_models(server)
    return server


def write_config(tmp: Path, text: str) -> Path:
    path = tmp / "respond.toml"
    path.write_text(text)
    return path
