"""Start real respond server processes for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import processes

# Every server log this session wrote: a failed test shows what the servers said meanwhile.
LOGS: list[Path] = []


def log_sizes() -> dict[Path, int]:
    return {path: path.stat().st_size for path in LOGS if path.exists()}


def logged_since(sizes: dict[Path, int], lines: int = 80) -> str:
    """The last `lines` each server log gained since `sizes` (from its start if newer)."""
    parts = []
    for path in LOGS:
        if not path.exists():
            continue
        with path.open("rb") as log:
            log.seek(sizes.get(path, 0))
            gained = log.read().decode(errors="replace").splitlines()[-lines:]
        if gained:
            parts.append(f"--- {path.name}\n" + "\n".join(gained))
    return "\n".join(parts)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    env: dict[str, str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        processes.stop(self.process)

    def again(self) -> Server:
        """The same program started again, on the same port (a stopped one's restart)."""
        with self.log_path.open("ab") as log:
            process = processes.spawn(self.process.args, log=log, env=self.env)  # type: ignore[arg-type]
        server = Server(process, self.port, self.log_path, self.env)
        wait_healthy(server)
        return server


def start_server(
    tmp: Path,
    *args: str,
    env: dict[str, str] | None = None,
    module: Sequence[str] = ("-m", "respond", "serve"),
    wait_ready: bool = True,
) -> Server:
    """Start `respond serve` (or another module) on a free port and wait for /health."""
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"server-{port}.log"
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    command = [sys.executable, *module, "--host", "127.0.0.1", "--port", str(port), *args]
    if "--data-dir" not in args and module[-1] == "serve":
        command += ["--data-dir", str(tmp / "data")]
    with log_path.open("wb") as log:
        process = processes.spawn(command, log=log, env=full_env)
    LOGS.append(log_path)
    server = Server(process, port, log_path, full_env)
    if wait_ready:
        wait_healthy(server)
    return server


def wait_healthy(server: Server, timeout: float = 120) -> None:
    wait_ok(server, f"{server.url}/health", timeout)


def wait_ok(server: Server, url: str, timeout: float = 120) -> None:
    """Wait until GET `url` answers 200; stop the server and show its log if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.log()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"{url} did not answer 200 after {timeout}s:\n{server.log()}")
