"""GET /metrics after known traffic: every count moves by exactly what was sent.

Scraped with prometheus-client's own text parser. Each test that counts has a server of
its own, so no other test's traffic moves the numbers it checks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import moved, scrape, value
from tests.support.server import Server, free_port, start_server
from tests.support.upstreams import start_fake

MODEL = "smollm2-135m"
RESPONSES = "/v1/responses"


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("metrics"), "--threads", "2")
    yield server
    server.stop()


def create(server: Server, **body: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=300)


def test_requests_tokens_latencies_and_store(counted: Server) -> None:
    before = scrape(counted.url)
    answers = [
        create(counted, input="Name a color.", max_output_tokens=8, temperature=0),
        create(counted, input="Name a fruit.", max_output_tokens=8, store=False),
    ]
    with httpx.stream(
        "POST",
        f"{counted.base_url}/responses",
        json={"input": "Count to three.", "max_output_tokens": 8, "stream": True},
        timeout=120,
    ) as stream:
        frames = [line for line in stream.iter_lines() if line.startswith("data: ")]
    final = json.loads(frames[-1][6:])["response"]
    missing = create(counted, model="no-such-model", input="x")
    assert [a.status_code for a in answers] == [200, 200] and missing.status_code == 404
    responses = [a.json() for a in answers] + [final]
    assert httpx.get(f"{counted.base_url}/responses/{responses[0]['id']}").status_code == 200
    after = scrape(counted.url)

    ok = {"route": RESPONSES, "model": MODEL, "status": "200"}
    assert moved(before, after, "respond_requests_total", **ok) == 3
    assert moved(before, after, "respond_requests_total", route=RESPONSES, model="", status="404")
    assert moved(before, after, "respond_request_duration_seconds_count", route=RESPONSES) == 4
    usage = [r["usage"] for r in responses]
    for metric, field in (("input", "input_tokens"), ("output", "output_tokens")):
        name = f"respond_{metric}_tokens_total"
        assert moved(before, after, name, model=MODEL) == sum(u[field] for u in usage)
    cached = sum(u["input_tokens_details"]["cached_tokens"] for u in usage)
    assert moved(before, after, "respond_cached_tokens_total", model=MODEL) == cached
    for status in ("completed", "incomplete"):
        count = sum(r["status"] == status for r in responses)
        assert moved(before, after, "respond_runs_total", model=MODEL, status=status) == count
    # Each run produced output: one first-token time each, and gaps between its deltas.
    assert moved(before, after, "respond_time_to_first_token_seconds_count", model=MODEL) == 3
    assert moved(before, after, "respond_inter_token_latency_seconds_count", model=MODEL) >= 3
    assert moved(before, after, "respond_kv_cache_reuse_ratio_count", model=MODEL) == 3
    # Two runs were stored (store: false is not), and one was read back.
    save = {"operation": "save_response"}
    assert moved(before, after, "respond_store_operation_duration_seconds_count", **save) == 2
    get = {"operation": "get_response"}
    assert moved(before, after, "respond_store_operation_duration_seconds_count", **get) == 1
    assert moved(before, after, "respond_store_errors_total", **save) == 0
    # The embedded engine: its four slots (the default), idle again, nobody waiting.
    assert value(after, "respond_engine_slots", model=MODEL) == 4
    assert value(after, "respond_engine_busy_slots", model=MODEL) == 0
    assert value(after, "respond_engine_queue_length", model=MODEL) == 0


def test_function_calls_and_background_runs(counted: Server) -> None:
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    before = scrape(counted.url)
    forced = create(
        counted,
        input="Weather in Oslo?",
        tools=[tool],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=24,
    ).json()
    queued = create(counted, input="Say hi.", max_output_tokens=4, background=True).json()
    deadline = time.monotonic() + 300
    while queued["status"] in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.2)
        queued = httpx.get(f"{counted.base_url}/responses/{queued['id']}", timeout=30).json()
    after = scrape(counted.url)
    calls = sum(item["type"] == "function_call" for item in forced["output"])
    assert calls >= 1
    returned = {"type": "function_call", "outcome": "returned"}
    assert moved(before, after, "respond_tool_calls_total", **returned) == calls
    status = queued["status"]
    assert status in ("completed", "incomplete")
    assert moved(before, after, "respond_background_runs_total", status=status) == 1


def test_request_id_header_matches_the_log(counted: Server) -> None:
    reply = httpx.get(f"{counted.base_url}/models")
    generated = reply.headers["x-request-id"]
    assert generated.startswith("req_")
    mine = httpx.get(f"{counted.base_url}/models", headers={"x-request-id": "trace-42.a"})
    assert mine.headers["x-request-id"] == "trace-42.a"
    # An id that could forge log lines or headers is replaced, not echoed.
    odd = httpx.get(f"{counted.base_url}/models", headers={"x-request-id": "a b<x>"})
    assert odd.headers["x-request-id"].startswith("req_")
    deadline = time.monotonic() + 10
    while "id=trace-42.a" not in counted.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = counted.log()
    assert "GET /v1/models 200" in log and f"id={generated}" in log and "id=trace-42.a" in log


def test_start_up_block(counted: Server) -> None:
    log = counted.log()
    assert "respond is ready" in log
    for line in (
        f"playground  {counted.url}/",
        f"API         {counted.base_url}",
        f"model       {MODEL} (llama.cpp, context 4096 tokens, 4 slots, 31/31 layers on CPU, "
        "KV f16/f16, flash attention auto, tools: hermes fallback prompt (format unknown), "
        "reasoning: none)",
        "auth        off",
        f"curl -s {counted.base_url}/responses",
    ):
        assert line in log
    store = next(line for line in log.splitlines() if line.startswith("  store "))
    assert store.split()[-1].startswith("sqlite:") and store.endswith("respond.sqlite3")


def test_metrics_auth_flag(tmp_path: Path) -> None:
    key = {"Authorization": "Bearer k1"}
    guarded = start_server(tmp_path / "a", "--api-key", "k1", "--metrics-auth")
    open_one = start_server(tmp_path / "b", "--api-key", "k1")
    try:
        denied = httpx.get(f"{guarded.url}/metrics")
        assert denied.status_code == 401
        assert denied.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(f"{guarded.url}/metrics", headers=key).status_code == 200
        # By default /metrics is open, like /health, even when /v1 needs a key.
        assert httpx.get(f"{open_one.url}/metrics").status_code == 200
        assert httpx.get(f"{open_one.base_url}/models").status_code == 401
    finally:
        guarded.stop()
        open_one.stop()


def test_json_logs_carry_request_id_route_tokens_and_tenant(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("acme:key-acme\n")
    server = start_server(tmp_path, "--api-key-file", str(keys), "--log-format", "json")
    try:
        reply = httpx.post(
            f"{server.base_url}/responses",
            json={"input": "Hi.", "max_output_tokens": 4},
            headers={"Authorization": "Bearer key-acme", "x-request-id": "json-1"},
            timeout=120,
        )
        assert reply.status_code == 200 and reply.headers["x-request-id"] == "json-1"
        usage = reply.json()["usage"]
        entry = _log_entry(server, "json-1")
    finally:
        server.stop()
    assert entry["route"] == RESPONSES and entry["status"] == 200
    assert entry["tenant"] == "acme" and entry["model"] == MODEL
    assert (entry["input_tokens"], entry["output_tokens"]) == (
        usage["input_tokens"],
        usage["output_tokens"],
    )
    assert entry["duration_ms"] > 0
    lines = [line for line in server.log().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any(r["message"] == "ready" and r["models"] == [MODEL] for r in records)


def _log_entry(server: Server, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in server.log().splitlines():
            if f'"request_id": "{request_id}"' in line:
                entry: dict[str, Any] = json.loads(line)
                return entry
        time.sleep(0.1)
    raise AssertionError(f"no access record for {request_id}:\n{server.log()}")


def test_upstream_failover_failures_and_health(tmp_path: Path) -> None:
    fake = start_fake(tmp_path / "fake", "a")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    front = start_server(
        tmp_path / "respond", "--upstream", dead, "--upstream", fake.base_url, wait_ready=False
    )
    try:
        _wait_metrics(front)
        before = scrape(front.url)
        # The first request tries the dead member first (round-robin), fails over to the fake.
        ok = _once_loaded(front, "echo")
        broken = _once_loaded(front, "error500")
        after = scrape(front.url)
    finally:
        front.stop()
        fake.stop()
    assert ok.status_code == 200 and broken.status_code == 502
    assert moved(before, after, "respond_upstream_failovers_total", upstream=dead) == 1
    assert moved(before, after, "respond_upstream_failures_total", upstream=dead) == 1
    assert moved(before, after, "respond_upstream_failures_total", upstream=fake.base_url) == 1
    assert moved(before, after, "respond_upstream_failovers_total", upstream=fake.base_url) == 0
    assert value(after, "respond_upstream_up", upstream=dead) == 0
    assert value(after, "respond_upstream_up", upstream=fake.base_url) == 1
    assert value(after, "respond_upstream_in_flight", upstream=fake.base_url) == 0
    status = {"route": RESPONSES, "model": "error500", "status": "502"}
    assert moved(before, after, "respond_requests_total", **status) == 1


def _once_loaded(server: Server, model: str) -> httpx.Response:
    """A request to `model`, sent again while its engine still learns its upstream's facts
    (503 model_loading, refused before any upstream is asked: the counters stay as they are).
    Each model has its own engine, loading on its own: CI saw echo and error500 each loading.
    /health would say when, but its check of every member marks the dead one down first."""
    deadline = time.monotonic() + 60
    while True:
        reply = httpx.post(f"{server.base_url}/responses", json={"model": model, "input": "x"})
        loading = reply.status_code == 503 and reply.json()["error"]["code"] == "model_loading"
        if not loading or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


def _wait_metrics(server: Server) -> None:
    """Upstream-only servers have no model to load; wait for the socket."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.url}/metrics", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(server.log())
