"""Upstream processes for respond to front: the fake, or llama-cpp-python's own server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.server import Server, free_port, start_server


def wait_models(server: Server, timeout: float = 120) -> None:
    """Wait until GET /v1/models answers (these servers have no /health)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"upstream exited early:\n{server.log()}")
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"upstream not ready after {timeout}s:\n{server.log()}")


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
