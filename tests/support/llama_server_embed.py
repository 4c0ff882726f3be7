"""llama.cpp's llama-server (built by `make llama-server`) serving an embedding model: a
real `/v1/embeddings` upstream."""

from __future__ import annotations

from pathlib import Path

from tests.support import processes
from tests.support.server import Server, free_port, wait_ok

REPO = Path(__file__).resolve().parents[2]
BUILDS = Path.home() / ".cache/respond/llama-server"


def llama_server_binary() -> Path:
    """The pinned build (tools/llama-server.version) when the repository pins one, else the
    one build there is."""
    pin = REPO / "tools" / "llama-server.version"
    if pin.is_file():
        found = [BUILDS / pin.read_text().strip() / "bin/llama-server"]
    else:
        found = sorted(BUILDS.glob("*/bin/llama-server"))
    if not found or not found[-1].is_file():
        raise RuntimeError(f"no llama-server under {BUILDS}: `make llama-server` builds it")
    return found[-1]


def start_embedding_server(tmp: Path, model: Path) -> Server:
    """`llama-server --embedding` on `model`, one slot, its whole window in one batch."""
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"llama-server-embed-{port}.log"
    command = [
        str(llama_server_binary()),
        *("--model", str(model), "--embedding", "--ctx-size", "512", "--parallel", "1"),
        *("--batch-size", "512", "--ubatch-size", "512", "--threads", "1"),
        *("--host", "127.0.0.1", "--port", str(port), "--no-webui"),
    ]
    with log_path.open("wb") as log:
        process = processes.spawn(command, log=log)
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health")  # 503 while the model loads
    return server
