"""Soak: mixed traffic against one respond server for a set time, its footprint over time.

Clients send plain, streamed and background responses, chains by previous_response_id,
conversation turns and stream resumes of background runs, one after another, for
`--minutes`. Every `--every` seconds the server's resident memory (VmRSS), its open file
descriptors and the size of its data directory (the SQLite store) are sampled. At the end:
the samples, and the growth of each per thousand requests (a least-squares line through the
samples after the first minute, when caches have filled), which for a server that does not
leak is near zero apart from the store, which keeps what it is asked to keep.

Not part of `make bench` (it runs for as long as asked):

    .venv/bin/python bench/soak.py --minutes 60 [--clients 4] [--store postgresql://...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.server import Server, start_server

ASK = {"model": "smollm2-135m", "max_output_tokens": 16, "temperature": 0}


@dataclass
class Sample:
    seconds: float
    requests: int
    rss_mb: float
    fds: int
    store_mb: float


@dataclass
class Counts:
    requests: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, response: httpx.Response, what: str, expect: int = 200) -> httpx.Response:
        with self.lock:
            self.requests += 1
            if response.status_code != expect:
                self.failures.append(f"{what}: {response.status_code} {response.text[:200]}")
        return response


def client(server: Server, stop: threading.Event, counts: Counts) -> None:
    api = server.base_url
    with httpx.Client(timeout=300) as http:
        for turn in itertools.count():
            if stop.is_set():
                return
            kind = turn % 5
            if kind == 0:
                first = counts.done(
                    http.post(f"{api}/responses", json={**ASK, "input": "Hi."}), "plain"
                )
                if first.status_code == 200:
                    chained = {**ASK, "input": "More.", "previous_response_id": first.json()["id"]}
                    counts.done(http.post(f"{api}/responses", json=chained), "chain")
            elif kind == 1:
                body = {**ASK, "input": "Tell me about rivers.", "stream": True}
                with http.stream("POST", f"{api}/responses", json=body) as streamed:
                    for _ in streamed.iter_lines():
                        pass
                    counts.done(streamed, "stream")
            elif kind == 2:
                body = {**ASK, "input": "Name a fruit.", "background": True}
                made = counts.done(http.post(f"{api}/responses", json=body), "background")
                if made.status_code == 200:
                    params = {"stream": "true", "starting_after": "1"}
                    url = f"{api}/responses/{made.json()['id']}"
                    with http.stream("GET", url, params=params) as resumed:
                        for _ in resumed.iter_lines():
                            pass
                        counts.done(resumed, "resume")
            elif kind == 3:
                conversation = counts.done(
                    http.post(f"{api}/conversations", json={}), "conversation"
                )
                if conversation.status_code == 200:
                    body = {**ASK, "input": "Hello.", "conversation": conversation.json()["id"]}
                    counts.done(http.post(f"{api}/responses", json=body), "turn")
            else:
                counts.done(http.get(f"{api}/responses/resp_missing"), "missing", expect=404)


def sample(server: Server, data: Path, started: float, counts: Counts) -> Sample:
    pid = server.process.pid
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    store = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    return Sample(time.monotonic() - started, counts.requests, rss_kb / 1024, fds, store / 2**20)


def per_thousand(points: list[tuple[float, float]]) -> float:
    """The slope of the least-squares line through (requests, value), per 1000 requests."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return 1000 * sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--every", type=float, default=30, help="seconds between samples")
    parser.add_argument("--store", help="a postgresql:// URL (default: SQLite in a temp dir)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="respond-soak-"))
    data = tmp / "data"
    extra = ["--store", args.store] if args.store else []
    server = start_server(tmp, "--threads", "2", "--data-dir", str(data), *extra)
    stop, counts = threading.Event(), Counts()
    threads = [
        threading.Thread(target=client, args=(server, stop, counts)) for _ in range(args.clients)
    ]
    started = time.monotonic()
    samples = [sample(server, data, started, counts)]
    try:
        for thread in threads:
            thread.start()
        while time.monotonic() - started < args.minutes * 60:
            time.sleep(args.every)
            samples.append(sample(server, data, started, counts))
            last = samples[-1]
            print(
                f"{last.seconds / 60:6.1f} min {last.requests:7d} requests "
                f"rss {last.rss_mb:7.1f} MB fds {last.fds:4d} store {last.store_mb:7.2f} MB",
                flush=True,
            )
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        server.stop()
    settled = [s for s in samples if s.seconds >= 60] or samples
    growth = {
        name: per_thousand([(s.requests, getattr(s, name)) for s in settled])
        for name in ("rss_mb", "fds", "store_mb")
    }
    print(json.dumps({"requests": counts.requests, "failures": len(counts.failures),
                      "growth_per_1000_requests": growth}, indent=2))  # fmt: skip
    for failure in counts.failures[:10]:
        print("failure:", failure)


if __name__ == "__main__":
    main()
