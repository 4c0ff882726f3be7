"""A server killed with SIGKILL mid-run: after a restart nothing stored is lost, and the
run it was doing is failed (code run_interrupted) instead of staying in progress forever."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from tests.support.polling import folded, has_text, stored_events, wait_for
from tests.support.schema import validate_event, validate_response
from tests.support.server import start_server

LONG = {"input": "Write a very long story about a dragon.", "max_output_tokens": 2000}


def test_sigkill_mid_run_then_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_server(tmp_path, "--threads", "2", "--data-dir", str(data))
    try:
        kept = httpx.post(
            f"{first.base_url}/responses", json={"input": "Hi", "max_output_tokens": 4}, timeout=60
        ).json()
        conv = httpx.post(f"{first.base_url}/conversations", json={"metadata": {"a": "b"}}).json()
        running = httpx.post(
            f"{first.base_url}/responses", json={**LONG, "background": True}, timeout=60
        ).json()
        partial = wait_for(first.base_url, running["id"], has_text)
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()

    second = start_server(tmp_path, "--threads", "2", "--data-dir", str(data))
    try:
        base = second.base_url
        assert httpx.get(f"{base}/responses/{kept['id']}").json() == kept
        assert httpx.get(f"{base}/conversations/{conv['id']}").json() == conv
        failed = httpx.get(f"{base}/responses/{running['id']}").json()
        validate_response(failed)
        assert failed["status"] == "failed"
        assert failed["error"]["code"] == "run_interrupted"
        # What was generated before the crash is still there, closed as incomplete.
        text = failed["output"][0]["content"][0]["text"]
        assert text.startswith(partial["output"][0]["content"][0]["text"])
        assert failed["output"][0]["status"] == "incomplete"
        events = stored_events(base, running["id"])
        for event in events:
            validate_event(event)
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert events[-1]["type"] == "response.failed"
        assert events[-1]["response"] == failed
        assert folded(events) == failed  # ended through the same fail() as a live run
        assert [e["type"] for e in events[-4:]] == [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.failed",
        ]
    finally:
        second.stop()


def test_store_ttl_expires_objects(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--threads", "2", "--store-ttl", "2s")
    try:
        made = httpx.post(
            f"{server.base_url}/responses", json={"input": "Hi", "max_output_tokens": 4}, timeout=60
        ).json()
        assert httpx.get(f"{server.base_url}/responses/{made['id']}").status_code == 200
        time.sleep(3)
        assert httpx.get(f"{server.base_url}/responses/{made['id']}").status_code == 404
    finally:
        server.stop()


def test_bad_store_flags(tmp_path: Path) -> None:
    import subprocess
    import sys

    for flags, message in (
        (["--store-ttl", "soon"], "invalid duration"),
        (["--store", "mysql://x"], "unsupported --store"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "respond", "serve", "--data-dir", str(tmp_path), *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and message in done.stderr
