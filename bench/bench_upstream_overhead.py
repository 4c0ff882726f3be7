"""What respond adds in front of a Chat Completions upstream, measured side by side.

One run starts an upstream and, in front of it, respond (`--upstream`) and optionally
LiteLLM's proxy and open-responses-server (each in its own venv, created on first use by
`--compare`), then sends the same requests to each, interleaved round by round so drift
hits all alike:

    direct      POST /v1/chat/completions to the upstream itself (the baseline)
    respond     POST /v1/responses to respond
    litellm     POST /v1/responses to LiteLLM's proxy
    ors         POST /responses to open-responses-server

for non-streaming and streaming requests, at concurrency 1 and 32. It prints p50/p95
latency (to the last byte), p50 time to the first text delta when streaming, throughput,
and the latency each server adds over direct.

    .venv/bin/python bench/bench_upstream_overhead.py                  # fake upstream, fast
    .venv/bin/python bench/bench_upstream_overhead.py --upstream llama  # llama-cpp-python server
    .venv/bin/python bench/bench_upstream_overhead.py --compare         # + LiteLLM, ORS

The default upstream is the scripted fake (tests/support/fake_upstream.py, 16 chunks per
answer, no model), so the numbers are the proxies' own cost, not generation time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.server import Server, free_port, start_server  # noqa: E402
from tests.support.upstreams import start_fake, start_llama_cpp_server  # noqa: E402

VENVS = ROOT / "bench" / ".venvs"  # ignored by git; created by --compare
LITELLM = "litellm[proxy]==1.106.12"  # 1.107+ need litellm-proxy, not on the registry
ORS = "open-responses-server==0.4.1"
PROMPT = "Say hello in five words."
MAX_TOKENS = 16
EXPECT: str | None = "tok15"  # the fake upstream's last chunk; None for a real model
MASTER_KEY = "sk-bench-" + secrets.token_hex(16)


@dataclass
class Target:
    name: str
    url: str  # full endpoint URL
    body: Callable[[bool], dict[str, object]]
    is_delta: Callable[[dict[str, object]], bool]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Sample:
    latency: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    wall: float = 0.0
    count: int = 0
    errors: int = 0


def chat_body(model: str) -> Callable[[bool], dict[str, object]]:
    def body(stream: bool) -> dict[str, object]:
        return {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
            "stream": stream,
        }

    return body


def responses_body(model: str) -> Callable[[bool], dict[str, object]]:
    def body(stream: bool) -> dict[str, object]:
        return {
            "model": model,
            "input": PROMPT,
            "max_output_tokens": MAX_TOKENS,
            "temperature": 0,
            "stream": stream,
            "store": False,
        }

    return body


def chat_delta(event: dict[str, object]) -> bool:
    choices = event.get("choices")
    return bool(choices) and bool((choices[0].get("delta") or {}).get("content"))  # type: ignore[index]


def responses_delta(event: dict[str, object]) -> bool:
    return event.get("type") == "response.output_text.delta"


# ---------------------------------------------------------------- measuring


async def one(client: httpx.AsyncClient, target: Target, stream: bool, sample: Sample) -> None:
    started = time.perf_counter()
    try:
        if not stream:
            reply = await client.post(target.url, json=target.body(False), headers=target.headers)
            reply.raise_for_status()
            text = reply.text
        else:
            first = None
            async with client.stream(
                "POST", target.url, json=target.body(True), headers=target.headers
            ) as reply:
                reply.raise_for_status()
                lines = []
                async for line in reply.aiter_lines():
                    lines.append(line)
                    data = line.startswith("data: {")
                    if first is None and data and target.is_delta(json.loads(line[6:])):
                        first = time.perf_counter() - started
            if first is None:
                raise RuntimeError("no text delta in the stream")
            text = "\n".join(lines)
            sample.first.append(first)
        if EXPECT and EXPECT not in text:  # a fast wrong answer must not count
            raise RuntimeError(f"the answer lacks {EXPECT!r}: {text[:200]}")
    except Exception as exc:
        sample.errors += 1
        if sample.errors == 1:
            print(f"  {target.name}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        return
    sample.latency.append(time.perf_counter() - started)
    sample.count += 1


async def batch(target: Target, stream: bool, concurrency: int, requests: int) -> Sample:
    sample = Sample()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        await one(client, target, stream, Sample())  # warm the connection and caches
        queue = iter(range(requests))

        async def worker() -> None:
            for _ in queue:
                await one(client, target, stream, sample)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        sample.wall = time.perf_counter() - started
    return sample


def merge(samples: list[Sample]) -> Sample:
    out = Sample()
    for s in samples:
        out.latency += s.latency
        out.first += s.first
        out.wall += s.wall
        out.count += s.count
        out.errors += s.errors
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


# ---------------------------------------------------------------- servers


def venv_python(name: str, requirement: str) -> Path:
    """A venv of its own for a compared server, made once (pip, from the registry)."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing {requirement} into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], check=True)
    return python


def start_litellm(tmp: Path, upstream: str, model: str) -> Server:
    python = venv_python("litellm", LITELLM)
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench\n"
        "    litellm_params:\n"
        f"      model: custom_openai/{model}\n"  # bridged to Chat Completions
        f"      api_base: {upstream}\n"
        "      api_key: none\n"
    )
    port = free_port()
    log_path = tmp / "litellm.log"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list at start
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
        "LITELLM_MASTER_KEY": MASTER_KEY,  # it refuses to start without one
    }
    litellm = python.parent / "litellm"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(litellm), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = Server(process, port, log_path)
    wait_ready(server, "/health/liveliness", timeout=180)  # /v1/models needs the key
    return server


def start_ors(tmp: Path, upstream: str) -> Server:
    python = venv_python("ors", ORS)
    port = free_port()
    log_path = tmp / "ors.log"
    env = {
        **os.environ,
        "OPENAI_BASE_URL_INTERNAL": upstream.removesuffix("/v1"),
        "OPENAI_API_KEY": "none",
        "API_ADAPTER_HOST": "127.0.0.1",
        "API_ADAPTER_PORT": str(port),
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(python),
                "-m",
                "uvicorn",
                "open_responses_server.api_controller:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp,
        )
    server = Server(process, port, log_path)
    wait_ready(server, "/health", timeout=60)
    return server


def wait_ready(server: Server, path: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(server.url + path, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.process.poll() is not None:
            server.stop()
            raise RuntimeError(f"{server.url} did not start:\n{server.log()[-3000:]}")
        time.sleep(0.2)


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", choices=["fake", "llama"], default="fake")
    parser.add_argument("--requests", type=int, default=64, help="per batch (concurrency 32)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", action="store_true", help="also LiteLLM and ORS")
    args = parser.parse_args()

    global EXPECT
    with tempfile.TemporaryDirectory() as tmp_name, stopping() as stack:
        tmp = Path(tmp_name)
        if args.upstream == "fake":
            upstream = stack(start_fake(tmp / "fake", "bench"))
            model = "bench"
        else:
            from respond.engines.llamacpp import bundled_model_path

            upstream = stack(start_llama_cpp_server(tmp / "llama", bundled_model_path()))
            EXPECT = None
            model = httpx.get(f"{upstream.base_url}/models").json()["data"][0]["id"]
        front = stack(
            start_server(
                tmp / "respond",
                "--upstream",
                upstream.base_url,
                "--log-level",
                "warning",
                *(["--alias", "bench"] if args.upstream == "llama" else []),
            )
        )
        targets = [
            Target("direct", f"{upstream.base_url}/chat/completions", chat_body(model), chat_delta),
            Target(
                "respond", f"{front.base_url}/responses", responses_body("bench"), responses_delta
            ),
        ]
        if args.compare:
            for name, start in (
                ("litellm", lambda: start_litellm(tmp, upstream.base_url, model)),
                ("ors", lambda: start_ors(tmp, upstream.base_url)),
            ):
                try:
                    server = stack(start())
                except Exception as exc:  # report and go on without it
                    print(f"{name} not measured: {exc}"[:2000], file=sys.stderr)
                    continue
                path = "/v1/responses" if name == "litellm" else "/responses"
                body = responses_body("bench" if name == "litellm" else model)
                auth = {"Authorization": f"Bearer {MASTER_KEY}"} if name == "litellm" else {}
                targets.append(Target(name, server.url + path, body, responses_delta, auth))
        report(targets, args)


def report(targets: list[Target], args: argparse.Namespace) -> None:
    print(
        f"upstream: {args.upstream}; {args.rounds} rounds, interleaved; "
        f"{args.requests} requests per batch at concurrency 32, "
        f"{max(8, args.requests // 4)} at concurrency 1\n"
    )
    print(
        "| mode | conc | server | p50 ms | p95 ms | first delta p50 ms | req/s "
        "| added p50 ms | throughput vs direct | errors |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for stream in (False, True):
        for concurrency in (1, 32):
            requests = args.requests if concurrency > 1 else max(8, args.requests // 4)
            samples: dict[str, list[Sample]] = {t.name: [] for t in targets}
            for _ in range(args.rounds):
                for target in targets:
                    samples[target.name].append(
                        asyncio.run(batch(target, stream, concurrency, requests))
                    )
            merged = {name: merge(s) for name, s in samples.items()}
            base = merged["direct"]
            base_p50 = pct(base.latency, 0.5)
            base_rps = base.count / base.wall if base.wall else float("nan")
            for target in targets:
                s = merged[target.name]
                rps = s.count / s.wall if s.wall else float("nan")
                first = f"{pct(s.first, 0.5):.1f}" if stream else "-"
                added = "-" if target.name == "direct" else f"{pct(s.latency, 0.5) - base_p50:+.1f}"
                ratio = "-" if target.name == "direct" else f"{rps / base_rps:.2f}x"
                print(
                    f"| {'stream' if stream else 'json'} | {concurrency} | {target.name} "
                    f"| {pct(s.latency, 0.5):.1f} | {pct(s.latency, 0.95):.1f} | {first} "
                    f"| {rps:.0f} | {added} | {ratio} | {s.errors} |",
                    flush=True,
                )
    python = sys.version.split()[0]
    print(f"\npercentiles over every round's requests; python {python}, {os.cpu_count()} CPUs")


@contextmanager
def stopping() -> Iterator[Callable[[Server], Server]]:
    """Stop every started server on the way out, last started first."""
    started: list[Server] = []

    def keep(server: Server) -> Server:
        started.append(server)
        return server

    try:
        yield keep
    finally:
        for server in reversed(started):
            server.stop()


if __name__ == "__main__":
    main()
