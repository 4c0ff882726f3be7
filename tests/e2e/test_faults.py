"""The parts respond stands on, failing under it: a full disk under the SQLite store, an
upstream server killed while it streams, and PostgreSQL restarted while runs go on."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond.engines.llamacpp import bundled_model_path
from tests.support.polling import wait_for
from tests.support.private_pg import PrivatePostgres, start_private_postgres
from tests.support.server import Server, start_server
from tests.support.upstreams import start_llama_server

MODEL = "smollm2-135m"
ASK = {"model": MODEL, "input": "Name a colour.", "max_output_tokens": 8}
ACTIVE = ("queued", "in_progress")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: a disk that fills up on demand."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no space left."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: closing has nothing to write
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_is_a_clear_507_and_service_returns_with_space(
    small_disk: Path, tmp_path: Path
) -> None:
    data = small_disk / "data"
    server = start_server(tmp_path, "--data-dir", str(data), "--embedding-model", "none")
    try:
        kept = httpx.post(f"{server.base_url}/responses", json=ASK, timeout=60)
        assert kept.status_code == 200
        filler = fill(small_disk)

        for body in (ASK, {**ASK, "stream": False}):  # the first finds out, the next is refused
            refused = httpx.post(f"{server.base_url}/responses", json=body, timeout=60)
            assert refused.status_code == 507, refused.text
            assert refused.json()["error"]["code"] == "storage_full"
            assert "free space" in refused.json()["error"]["message"]
        made = httpx.post(f"{server.base_url}/conversations", json={}, timeout=30)
        assert made.status_code == 507, made.text
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 503 and health.json()["store"] == "full"
        again = httpx.get(f"{server.base_url}/responses/{kept.json()['id']}")
        assert again.status_code == 200  # what was stored stays readable

        filler.unlink()
        deadline = 30  # the heartbeat writes every 2 s and clears the state when it can
        while httpx.get(f"{server.url}/health").status_code != 200:
            deadline -= 1
            assert deadline, "the server did not come back when space returned"
            threading.Event().wait(1)
        after = httpx.post(f"{server.base_url}/responses", json=ASK, timeout=60)
        assert after.status_code == 200, after.text
        assert httpx.get(f"{server.base_url}/responses/{after.json()['id']}").status_code == 200
    finally:
        server.stop()
    with contextlib.closing(sqlite3.connect(data / "respond.sqlite3")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert "Traceback" not in server.log(), server.log()[-3000:]


# ---------------------------------------------------------------- an upstream killed mid-stream


@pytest.fixture
def two_upstreams(tmp_path: Path) -> Iterator[tuple[Server, list[Server]]]:
    """respond in front of a pool of two real llama-servers."""
    upstreams = [start_llama_server(tmp_path / n, bundled_model_path()) for n in ("u1", "u2")]
    pool = [arg for u in upstreams for arg in ("--upstream", u.base_url)]
    front = start_server(tmp_path / "front", *pool, "--alias", MODEL)
    yield front, upstreams
    front.stop()
    for upstream in upstreams:
        upstream.stop()


def _serving(upstreams: list[Server]) -> Server:
    """The upstream that took the streamed request (its log shows a slot launched)."""
    for _ in range(200):
        busy = [u for u in upstreams if "launch_slot_" in u.log()]
        if busy:
            return busy[0]
        threading.Event().wait(0.05)
    raise AssertionError("no upstream received the request")


def test_an_upstream_killed_mid_stream_fails_that_response_and_not_the_next(
    two_upstreams: tuple[Server, list[Server]],
) -> None:
    front, upstreams = two_upstreams
    body = {**ASK, "input": "Write a long story about a dragon.", "max_output_tokens": 400}
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{front.base_url}/responses", json={**body, "stream": True}, timeout=60
    ) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(json.loads(line[len("data: ") :]))
            if len(events) == 8:  # deltas are flowing: kill the upstream making them
                victim = _serving(upstreams)
                victim.process.send_signal(signal.SIGKILL)
    last = events[-1]
    assert last["type"] == "response.failed", last["type"]
    assert last["response"]["error"]["code"] == "upstream_error", last["response"]["error"]
    assert last["response"]["output"], "what was generated before the kill is kept"
    victim.process.wait()
    after = httpx.post(f"{front.base_url}/responses", json=ASK, timeout=60)
    assert after.status_code == 200, after.text
    assert after.json()["status"] in ("completed", "incomplete")


# ---------------------------------------------------------------- PostgreSQL restarted


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    pg = start_private_postgres()
    yield pg
    pg.stop()


def test_a_postgres_restart_mid_run_loses_nothing_acknowledged(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    server = start_server(tmp_path, "--store", private_pg.url, "--embedding-model", "none")
    try:
        kept = httpx.post(f"{server.base_url}/responses", json=ASK, timeout=60)
        assert kept.status_code == 200, kept.text
        long = {**ASK, "input": "Write a long story about a dragon.", "max_output_tokens": 200}
        background = httpx.post(
            f"{server.base_url}/responses", json={**long, "background": True}, timeout=60
        ).json()
        wait_for(server.base_url, background["id"], lambda b: bool(b["output"]))
        streamed: list[dict[str, Any]] = []

        def stream() -> None:
            body = {**long, "max_output_tokens": 64, "stream": True}
            with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=120) as r:
                streamed.extend(
                    json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")
                )

        reader = threading.Thread(target=stream)
        reader.start()
        private_pg.restart()  # every connection of respond's pool is cut
        reader.join(timeout=120)

        assert streamed[-1]["type"] in ("response.completed", "response.incomplete")
        streamed_id = streamed[-1]["response"]["id"]
        after = httpx.post(f"{server.base_url}/responses", json=ASK, timeout=60)
        assert after.status_code == 200, after.text  # no restart of respond needed
        for response_id in (kept.json()["id"], streamed_id, after.json()["id"]):
            got = httpx.get(f"{server.base_url}/responses/{response_id}", timeout=30)
            assert got.status_code == 200, got.text  # acknowledged, so kept
        final = wait_for(server.base_url, background["id"], lambda b: b["status"] not in ACTIVE)
        assert final["status"] in ("completed", "incomplete"), final
        assert httpx.get(f"{server.url}/health").status_code == 200

        private_pg.halt()  # an outage: the database stays down until started again
        try:
            _store_unavailable_during_the_outage(server, kept.json()["id"])
        finally:
            private_pg.start()
        _until_healthy(server)  # the heartbeat gets through again: no restart of respond
        again = httpx.post(f"{server.base_url}/responses", json=ASK, timeout=60)
        assert again.status_code == 200, again.text
        got = httpx.get(f"{server.base_url}/responses/{kept.json()['id']}", timeout=30)
        assert got.status_code == 200, got.text
    finally:
        server.stop()
    assert " 500 " not in server.log(), server.log()[-3000:]


def _store_unavailable_during_the_outage(server: Server, response_id: str) -> None:
    """/health says the store is down once a transaction has failed (the heartbeat's, every
    2 s, after respond has waited RECONNECT_SECONDS for the database), and a request that
    needs the store is a 503 `store_unavailable` with Retry-After."""
    deadline = time.monotonic() + 60
    health = httpx.get(f"{server.url}/health", timeout=30)
    while health.status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        health = httpx.get(f"{server.url}/health", timeout=30)
    assert health.status_code == 503, health.text
    assert health.json()["store"] == "unavailable"
    assert health.json()["error"]["code"] == "store_unavailable"
    during = httpx.get(f"{server.base_url}/responses/{response_id}", timeout=60)
    assert during.status_code == 503, during.text
    assert during.json()["error"]["code"] == "store_unavailable"
    assert during.headers["retry-after"] == "1"


def _until_healthy(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(f"{server.url}/health", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "/health did not come back after the outage"
        time.sleep(0.5)
