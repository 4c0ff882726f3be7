"""The metrics module without a server: store timing and errors, engine reports, isolation."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from respond._banner import redact_url
from respond._logs import JSONFormatter
from respond.engines import Delta, Engine, LoadReport, ModelInfo, PromptCacheLoad, UpstreamLoad
from respond.metrics import Metrics
from respond.store.sqlite import SQLiteStore


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class Pooled(Engine):
    """An engine that only reports load (two models may share one upstream pool)."""

    def __init__(self, name: str, report: LoadReport) -> None:
        self.info = ModelInfo(id=name, owned_by="test", context_window=None, backend="test")
        self.report = report

    def stream(self, turn: object) -> AsyncGenerator[Delta, None]:
        raise NotImplementedError

    def load_report(self) -> LoadReport:
        return self.report


async def test_store_operations_are_timed_and_failures_counted(tmp_path: Path) -> None:
    metrics = Metrics()
    store = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=60)
    store.observer = metrics.observe_store
    await store.open()
    assert await store.get_response(None, "resp_missing") is None
    await store.close()
    with pytest.raises(AssertionError):  # a closed store: the operation fails
        await store.get_response(None, "resp_missing")
    got = samples(metrics)
    op = frozenset({("operation", "get_response")})
    assert got[("respond_store_operation_duration_seconds_count", op)] == 2
    assert got[("respond_store_errors_total", op)] == 1
    migrate = frozenset({("operation", "migrate")})
    assert got[("respond_store_errors_total", migrate)] == 0


def test_engine_reports_are_read_at_scrape_time_and_pools_counted_once() -> None:
    shared = (
        UpstreamLoad("http://a/v1", in_flight=2, healthy=True, failures=1, failovers=0),
        UpstreamLoad("http://b/v1", in_flight=0, healthy=False, failures=4, failovers=3),
    )
    engines = {
        "m1": Pooled("m1", LoadReport(upstreams=shared)),
        "m2": Pooled("m2", LoadReport(upstreams=shared)),
        "local": Pooled("local", LoadReport(slots=4, busy_slots=3, queued=7)),
    }
    metrics = Metrics(engines)
    got = samples(metrics)
    b = frozenset({("upstream", "http://b/v1")})
    assert got[("respond_upstream_failures_total", b)] == 4
    assert got[("respond_upstream_failovers_total", b)] == 3
    assert got[("respond_upstream_up", b)] == 0
    assert got[("respond_upstream_in_flight", frozenset({("upstream", "http://a/v1")}))] == 2
    local = frozenset({("model", "local")})
    assert got[("respond_engine_slots", local)] == 4
    assert got[("respond_engine_busy_slots", local)] == 3
    assert got[("respond_engine_queue_length", local)] == 7
    # Engines without slots report no slot gauges.
    assert ("respond_engine_slots", frozenset({("model", "m1")})) not in got
    engines["local"].report = LoadReport(slots=4, busy_slots=0, queued=0)
    assert samples(metrics)[("respond_engine_queue_length", local)] == 0


def test_a_prompt_cache_report_becomes_its_gauges_and_counters() -> None:
    load = PromptCacheLoad(
        limit_bytes=64 << 20,
        bytes=5 << 20,
        entries=2,
        hits=7,
        misses=3,
        saves=9,
        evictions=1,
        restored_tokens=1234,
        failures=0,
    )
    engines = {
        "local": Pooled("local", LoadReport(slots=2, prompt_cache=load)),
        "remote": Pooled("remote", LoadReport(upstreams=())),
    }
    got = samples(Metrics(engines))
    local = frozenset({("model", "local")})
    assert got[("respond_prompt_cache_bytes", local)] == 5 << 20
    assert got[("respond_prompt_cache_limit_bytes", local)] == 64 << 20
    assert got[("respond_prompt_cache_entries", local)] == 2
    assert got[("respond_prompt_cache_hits_total", local)] == 7
    assert got[("respond_prompt_cache_misses_total", local)] == 3
    assert got[("respond_prompt_cache_saves_total", local)] == 9
    assert got[("respond_prompt_cache_evictions_total", local)] == 1
    assert got[("respond_prompt_cache_restored_tokens_total", local)] == 1234
    assert got[("respond_prompt_cache_restore_failures_total", local)] == 0
    # An engine without one reports none.
    assert ("respond_prompt_cache_bytes", frozenset({("model", "remote")})) not in got


def test_each_app_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.observe_request("/v1/models", "", 200, 0.01)
    route = frozenset({("route", "/v1/models"), ("model", ""), ("status", "200")})
    assert samples(first)[("respond_requests_total", route)] == 1
    assert ("respond_requests_total", route) not in samples(second)


def test_store_urls_lose_their_secrets() -> None:
    assert redact_url("postgresql://app:s3cret@db:5432/x?schema=a") == (
        "postgresql://app:***@db:5432/x?schema=a"
    )
    assert redact_url("postgresql://db/x?password=s3cret&sslmode=require") == (
        "postgresql://db/x?password=***&sslmode=require"
    )
    assert redact_url("postgresql://app@db/x") == "postgresql://app@db/x"


def test_json_log_lines_carry_access_fields() -> None:
    record = logging.LogRecord("respond.access", logging.INFO, __file__, 1, "GET /", None, None)
    record.access = {"request_id": "req_1", "status": 200, "tenant": None}
    line = JSONFormatter().format(record)
    assert line.startswith("{") and "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "GET /" and entry["request_id"] == "req_1"
    assert entry["level"] == "info" and entry["time"].endswith("Z")
