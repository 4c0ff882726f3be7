"""Prometheus metrics: one registry per app, scraped at GET /metrics.

Each app owns its registry (tests create several apps in one process, and each replica
exposes its own numbers). Counters and histograms are moved by the code that sees the
event (the access middleware, the run, the store); what engines know (queue, slots,
upstream health) is read from `Engine.load_report()` at scrape time, so engines stay
free of Prometheus.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from respond.engines._base import (
    Delta,
    Engine,
    PromptCacheLoad,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
)

if TYPE_CHECKING:
    from respond.protocol.resource import ResponseResource

__all__ = ["Metrics", "RunClock"]

# Latencies of a small local model span milliseconds (a token) to minutes (a long answer).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TOKEN_GAP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
RATIO_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)

# Deltas that are model output (what TTFT and the token gaps time).
OUTPUT_DELTAS = (TextDelta, ReasoningDelta, ToolCallStart, ToolCallArgumentsDelta)
# Output items that are tool calls handed back to the client to execute.
CLIENT_TOOL_CALLS = (
    "function_call",
    "custom_tool_call",
    "shell_call",  # a client's (no environment); a hosted shell's are not counted
    "local_shell_call",
    "apply_patch_call",
    "computer_call",
    "tool_search_call",  # a client's (execution "client"); respond's own are not counted
)


class Metrics:
    """Every metric respond exposes, registered in a registry of its own."""

    def __init__(self, engines: Mapping[str, Engine] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "respond_requests",
            "HTTP requests answered, by route template, model and status code.",
            ["route", "model", "status"],
            registry=r,
        )
        self.request_duration = Histogram(
            "respond_request_duration_seconds",
            "Time from a request's arrival to the end of its answer (streams included).",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.input_tokens = Counter(
            "respond_input_tokens", "Prompt tokens of finished runs.", ["model"], registry=r
        )
        self.cached_tokens = Counter(
            "respond_cached_tokens",
            "Prompt tokens served from the KV/prefix cache (part of input tokens).",
            ["model"],
            registry=r,
        )
        self.output_tokens = Counter(
            "respond_output_tokens", "Generated tokens of finished runs.", ["model"], registry=r
        )
        self.ttft = Histogram(
            "respond_time_to_first_token_seconds",
            "From the run asking its engine (queue wait included) to the first output delta.",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.inter_token = Histogram(
            "respond_inter_token_latency_seconds",
            "Gap between consecutive output deltas of a run.",
            ["model"],
            buckets=TOKEN_GAP_BUCKETS,
            registry=r,
        )
        self.cache_reuse = Histogram(
            "respond_kv_cache_reuse_ratio",
            "Per run: cached prompt tokens / prompt tokens.",
            ["model"],
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.runs = Counter(
            "respond_runs",
            "Finished runs (Responses requests), by model and final status.",
            ["model", "status"],
            registry=r,
        )
        self.background_runs = Counter(
            "respond_background_runs",
            "Finished background runs executed by this process, by final status.",
            ["status"],
            registry=r,
        )
        self.tool_calls = Counter(
            "respond_tool_calls",
            "Tool calls by tool type and outcome (function calls: returned to the client).",
            ["type", "outcome"],
            registry=r,
        )
        self.store_duration = Histogram(
            "respond_store_operation_duration_seconds",
            "Store operations (one transaction each), by operation.",
            ["operation"],
            buckets=STORE_BUCKETS,
            registry=r,
        )
        self.store_errors = Counter(
            "respond_store_errors",
            "Store operations that raised, by operation.",
            ["operation"],
            registry=r,
        )
        if engines:
            r.register(EngineCollector(engines))

    # ------------------------------------------------------------ hooks

    def run_clock(self, model: str) -> RunClock:
        return RunClock(self, model)

    def observe_store(self, operation: str, seconds: float, failed: bool) -> None:
        self.store_duration.labels(operation).observe(seconds)
        errors = self.store_errors.labels(operation)  # exists at 0, so rates can be taken
        if failed:
            errors.inc()

    def observe_request(self, route: str, model: str, status: int, seconds: float) -> None:
        self.requests.labels(route, model, str(status)).inc()
        self.request_duration.labels(route).observe(seconds)


class RunClock:
    """Times one run's deltas and, at its end, counts its tokens, status and tool calls."""

    def __init__(self, metrics: Metrics, model: str) -> None:
        self.metrics = metrics
        self.model = model
        self.started = time.perf_counter()
        self.last: float | None = None

    def begin(self) -> None:
        """The run asks its engine now (a background run may have waited queued before)."""
        self.started = time.perf_counter()

    def saw(self, delta: Delta) -> None:
        if not isinstance(delta, OUTPUT_DELTAS):
            return
        now = time.perf_counter()
        if self.last is None:
            self.metrics.ttft.labels(self.model).observe(now - self.started)
        else:
            self.metrics.inter_token.labels(self.model).observe(now - self.last)
        self.last = now

    def ended(self, response: ResponseResource) -> None:
        m, model = self.metrics, self.model
        m.runs.labels(model, response.status).inc()
        if response.background:
            m.background_runs.labels(response.status).inc()
        usage = response.usage
        if usage is not None:
            cached = usage.input_tokens_details.cached_tokens
            m.input_tokens.labels(model).inc(usage.input_tokens)
            m.cached_tokens.labels(model).inc(cached)
            m.output_tokens.labels(model).inc(usage.output_tokens)
            if usage.input_tokens:
                m.cache_reuse.labels(model).observe(cached / usage.input_tokens)
        for item in response.output:
            kind = getattr(item, "type", None)
            # A tool_search or shell respond ran (execution "server", a container
            # environment) was not handed to the client.
            ran = getattr(item, "execution", "client") != "client"
            if kind in CLIENT_TOOL_CALLS and not ran and getattr(item, "environment", None) is None:
                m.tool_calls.labels(kind, "returned").inc()


class EngineCollector(Collector):
    """What the engines report about their load, read fresh at every scrape."""

    def __init__(self, engines: Mapping[str, Engine]) -> None:
        self.engines = dict(engines)

    def describe(self) -> Iterable[Metric]:
        return []  # no collect() at registration: engines may still be loading

    def collect(self) -> Iterable[Metric]:
        queued = GaugeMetricFamily(
            "respond_engine_queue_length", "Runs waiting for a slot.", labels=["model"]
        )
        busy = GaugeMetricFamily(
            "respond_engine_busy_slots", "Slots generating now.", labels=["model"]
        )
        slots = GaugeMetricFamily(
            "respond_engine_slots", "Sequences the engine can run at once.", labels=["model"]
        )
        in_flight = GaugeMetricFamily(
            "respond_upstream_in_flight", "Requests open to an upstream.", labels=["upstream"]
        )
        up = GaugeMetricFamily(
            "respond_upstream_up", "1 while an upstream is considered healthy.", labels=["upstream"]
        )
        failures = CounterMetricFamily(
            "respond_upstream_failures",
            "Requests to an upstream that failed (connect, 5xx, timeout, broken stream).",
            labels=["upstream"],
        )
        failovers = CounterMetricFamily(
            "respond_upstream_failovers",
            "Requests that moved on from this upstream to another pool member.",
            labels=["upstream"],
        )
        cache = _PromptCacheFamilies()
        devices = _device_memory(self.engines)
        seen: set[str] = set()  # models sharing a pool report its members once
        for name, engine in self.engines.items():
            report = engine.load_report()
            if report is None:
                continue
            if report.slots is not None:
                slots.add_metric([name], report.slots)
                busy.add_metric([name], report.busy_slots)
                queued.add_metric([name], report.queued)
            if report.prompt_cache is not None:
                cache.add(name, report.prompt_cache)
            for member in report.upstreams:
                if member.url in seen:
                    continue
                seen.add(member.url)
                in_flight.add_metric([member.url], member.in_flight)
                up.add_metric([member.url], 1 if member.healthy else 0)
                failures.add_metric([member.url], member.failures)
                failovers.add_metric([member.url], member.failovers)
        return [queued, busy, slots, in_flight, up, failures, failovers, devices, *cache.families()]


def _device_memory(engines: Mapping[str, Engine]) -> GaugeMetricFamily:
    """The memory of the devices holding embedded models' layers, as each reported it once
    the model was loaded (read then: an RPC device answers only on its decode connection)."""
    family = GaugeMetricFamily(
        "respond_device_memory_bytes",
        "Memory of a device holding a model's layers, as reported once the model loaded.",
        labels=["model", "device", "kind"],
    )
    for name, engine in engines.items():
        placement = engine.info.placement or {}
        for device in placement.get("devices", []):
            for kind in ("free", "total"):
                mib = device[f"memory_{kind}_mib"]
                family.add_metric([name, device["name"], kind], mib * 1024 * 1024)
    return family


class _PromptCacheFamilies:
    """The prompt cache beyond the slots (the embedded engine's --cache-ram), per model."""

    def __init__(self) -> None:
        def gauge(name: str, text: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"respond_prompt_cache_{name}", text, labels=["model"])

        def counter(name: str, text: str) -> CounterMetricFamily:
            return CounterMetricFamily(f"respond_prompt_cache_{name}", text, labels=["model"])

        self.bytes = gauge("bytes", "Bytes of KV state the prompt cache holds in host RAM.")
        self.limit = gauge("limit_bytes", "The prompt cache's bound (--cache-ram); 0: off.")
        self.entries = gauge("entries", "Saved sequences the prompt cache holds.")
        self.hits = counter("hits", "Prompts whose prefix was restored from the prompt cache.")
        self.misses = counter(
            "misses", "Prompts the slots did not hold that the prompt cache could not restore."
        )
        self.saves = counter("saves", "Sequences saved as they left their slot.")
        self.evictions = counter("evictions", "Saved sequences dropped for room.")
        self.restored = counter(
            "restored_tokens", "Prompt tokens restored from the prompt cache, not evaluated."
        )
        self.failures = counter(
            "restore_failures", "Restores llama.cpp refused (the prompt was evaluated instead)."
        )

    def add(self, model: str, load: PromptCacheLoad) -> None:
        self.bytes.add_metric([model], load.bytes)
        self.limit.add_metric([model], load.limit_bytes)
        self.entries.add_metric([model], load.entries)
        self.hits.add_metric([model], load.hits)
        self.misses.add_metric([model], load.misses)
        self.saves.add_metric([model], load.saves)
        self.evictions.add_metric([model], load.evictions)
        self.restored.add_metric([model], load.restored_tokens)
        self.failures.add_metric([model], load.failures)

    def families(self) -> list[Metric]:
        return [
            self.bytes,
            self.limit,
            self.entries,
            self.hits,
            self.misses,
            self.saves,
            self.evictions,
            self.restored,
            self.failures,
        ]
