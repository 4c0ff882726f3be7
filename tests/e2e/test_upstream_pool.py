"""A pool of two upstream processes (FAKE upstreams): spread, affinity, a kill mid-stream,
failover, recovery."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import Server, free_port, start_server
from tests.support.sse import read_events
from tests.support.upstreams import start_fake, write_config


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[tuple[Server, dict[str, Server]]]:
    fakes = {name: start_fake(tmp_path / name, name) for name in ("a", "b")}
    urls = ", ".join(f'"{f.base_url}"' for f in fakes.values())
    timeouts = "timeouts = { connect = 1, first_byte = 5, idle = 5, probe_interval = 0.2 }\n"
    config = write_config(
        tmp_path,
        f'[models.pooled]\nupstream = [{urls}]\nmodel = "echo"\n{timeouts}'
        f'[models.pooled-slow]\nupstream = [{urls}]\nmodel = "slow"\n{timeouts}',
    )
    front = start_server(tmp_path / "respond", "--config", str(config))
    yield front, fakes
    front.stop()
    for fake in fakes.values():
        fake.stop()


def ask(front: Server, **extra: str) -> tuple[str, str]:
    """(response id, name of the upstream that served it)."""
    reply = httpx.post(
        f"{front.base_url}/responses", json={"model": "pooled", "input": "x", **extra}, timeout=30
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    text = body["output"][0]["content"][0]["text"]
    return body["id"], json.loads(text)["server"]


def served_by(front: Server, **extra: str) -> str:
    return ask(front, **extra)[1]


def test_spread_affinity_failover_and_recovery(pool: tuple[Server, dict[str, Server]]) -> None:
    front, fakes = pool
    # Idle pool: least in-flight ties are broken round-robin, so both serve.
    assert {served_by(front) for _ in range(6)} == {"a", "b"}
    # A prompt_cache_key sticks to one upstream (prefix-cache locality).
    assert len({served_by(front, prompt_cache_key="user-42") for _ in range(5)}) == 1
    # So does a previous_response_id chain.
    last, first_server = ask(front)
    for _ in range(4):
        last, server = ask(front, previous_response_id=last)
        assert server == first_server

    # Kill the upstream serving a stream, mid-stream: that stream ends with response.failed.
    before = {name: requests(fake) for name, fake in fakes.items()}
    with httpx.stream(
        "POST",
        f"{front.base_url}/responses",
        json={"model": "pooled-slow", "input": "x", "stream": True},
        timeout=30,
    ) as reply:
        events = read_events(reply)
        while next(events)["type"] != "response.output_text.delta":
            pass
        victim = next(name for name, fake in fakes.items() if requests(fake) > before[name])
        fakes[victim].process.kill()
        fakes[victim].process.wait()
        rest = list(events)
    assert rest[-1]["type"] == "response.failed"
    assert rest[-1]["response"]["error"]["code"] == "upstream_error"
    other = "b" if victim == "a" else "a"

    # Every later request succeeds: the connect failure fails over before any byte.
    assert [served_by(front) for _ in range(6)] == [other] * 6
    health = httpx.get(f"{front.url}/health")
    assert health.status_code == 200  # one backend per model is enough
    members = {u["url"]: u for u in health.json()["models"]["pooled"]["upstreams"]}
    dead = members[fakes[victim].base_url]
    assert dead["ok"] is False and "error" in dead
    assert members[fakes[other].base_url]["ok"] is True

    # Bring it back on the same address: the prober notices, and it serves again.
    fakes[victim] = start_fake(fakes[victim].log_path.parent, victim, port=fakes[victim].port)
    deadline = time.monotonic() + 15
    while served_by(front) != victim:
        assert time.monotonic() < deadline, "the restarted upstream never came back"
        time.sleep(0.1)


def requests(fake: Server) -> int:
    count: int = httpx.get(f"{fake.url}/stats").json()["requests"]
    return count


def test_all_upstreams_down_is_a_fast_502(tmp_path: Path) -> None:
    dead = [f"http://127.0.0.1:{free_port()}/v1" for _ in range(2)]
    config = write_config(
        tmp_path,
        f'[models.gone]\nupstream = ["{dead[0]}", "{dead[1]}"]\ntimeouts = {{ connect = 1 }}\n',
    )
    front = start_server(tmp_path / "respond", "--config", str(config), wait_ready=False)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{front.url}/health", timeout=5)
                # The first moments: it asks the upstreams for their context window (refused).
                if health.json().get("error", {}).get("code") != "model_loading":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and front.process.poll() is None, front.log()
            time.sleep(0.2)
        assert health.status_code == 503
        assert health.json()["error"]["code"] == "upstream_unavailable"
        started = time.monotonic()
        reply = httpx.post(
            f"{front.base_url}/responses", json={"model": "gone", "input": "x"}, timeout=30
        )
        assert reply.status_code == 502
        assert "No upstream could be reached" in reply.json()["error"]["message"]
        assert time.monotonic() - started < 10
    finally:
        front.stop()
