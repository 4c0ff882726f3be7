"""Upstream processes for respond to front: the fake, llama-cpp-python's own server, or
llama.cpp's llama-server (built by `make llama-server`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support import processes
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
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = processes.spawn([*command, "--name", name], log=log, env=env)
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


REPO = Path(__file__).resolve().parents[2]
LLAMA_SERVER_VERSION = (REPO / "tools" / "llama-server.version").read_text().strip()
LLAMA_SERVER = (
    Path.home() / ".cache/respond/llama-server" / LLAMA_SERVER_VERSION / "bin/llama-server"
)


def start_llama_server(tmp: Path, model: Path) -> Server:
    """llama.cpp's llama-server with its Jinja chat templates (tools need them).

    One slot of 2048 tokens, so that a prompt's room is the whole context.
    """
    if not LLAMA_SERVER.is_file():
        raise RuntimeError(f"{LLAMA_SERVER} is missing: `make llama-server` builds it")
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"llama-server-{port}.log"
    command = [
        str(LLAMA_SERVER),
        *("--model", str(model), "--jinja", "--ctx-size", "2048", "--parallel", "1"),
        *("--threads", "2", "--host", "127.0.0.1", "--port", str(port), "--no-webui"),
    ]
    with log_path.open("wb") as log:
        process = processes.spawn(command, log=log)
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health")  # 503 while the model loads
    return server


def write_config(tmp: Path, text: str) -> Path:
    path = tmp / "respond.toml"
    path.write_text(text)
    return path
