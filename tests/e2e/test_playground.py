"""The playground in a real browser: Debian's Chromium driven by Playwright (tests/clients/node).

Each test runs one scenario of tests/clients/node/playground.mjs against a real server with
an API key, then checks what the page showed against what the server stored. Screenshots of
each state are left in the test's tmp folder (pytest prints it on failure).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import Server, start_server

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
KEY = "playground-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("playground"), "--api-key", KEY)
    yield server
    server.stop()


SHOTS = {
    "stream": ["stream"],
    "tool": ["tool-call", "tool-result"],
    "chain": ["chain", "history"],
    "badkey": ["bad-key"],
}


def drive(server: Server, scenario: str, out: Path) -> dict[str, Any]:
    """Run one browser scenario; its JSON report, or the failure with the driver's output."""
    done = subprocess.run(
        ["node", "playground.mjs", scenario, server.url, str(out), KEY],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{scenario} failed:\n{done.stderr}\n{done.stdout}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # No request ever leaves the server: every URL the page loaded or called is on its origin.
    assert report["origins"] == [server.url]
    for shot in SHOTS[scenario]:
        assert (out / f"{shot}.png").stat().st_size > 10_000
    return report


def stored(server: Server, response_id: str) -> dict[str, Any]:
    reply = httpx.get(f"{server.base_url}/responses/{response_id}", headers=AUTH, timeout=30)
    assert reply.status_code == 200
    body: dict[str, Any] = reply.json()
    return body


def output_text(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def test_page_is_served_with_a_strict_policy(keyed: Server) -> None:
    for path in ("/", "/playground"):
        page = httpx.get(keyed.url + path)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert page.headers["cache-control"] == "no-cache"
        again = httpx.get(keyed.url + path, headers={"If-None-Match": page.headers["etag"]})
        assert again.status_code == 304
    asset = page.text.split('src="')[1].split('"')[0]
    script = httpx.get(keyed.url + asset)
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "immutable" in script.headers["cache-control"]
    stale = httpx.get(keyed.url + asset.replace("/assets/", "/assets/0"))
    assert stale.status_code == 404
    assert stale.json()["error"]["code"] == "not_found"


def test_streamed_answer_appears(keyed: Server, tmp_path: Path) -> None:
    report = drive(keyed, "stream", tmp_path)
    response = stored(keyed, report["responseId"])
    assert report["status"] == response["status"]
    # What streamed into the page is exactly what the server answered.
    assert report["text"] == output_text(response)
    assert report["deltas"] > 1


def test_forced_tool_call_renders_as_a_call_item(keyed: Server, tmp_path: Path) -> None:
    report = drive(keyed, "tool", tmp_path)
    first = stored(keyed, report["first"]["responseId"])
    calls = [item for item in first["output"] if item["type"] == "function_call"]
    assert [call["name"] for call in calls] == ["get_weather"]
    assert report["callId"] == calls[0]["call_id"]
    assert json.loads(report["args"]) == json.loads(calls[0]["arguments"])
    # The result typed by hand went back as a function_call_output on the chain.
    second = stored(keyed, report["second"]["responseId"])
    assert second["previous_response_id"] == first["id"]
    items = httpx.get(
        f"{keyed.base_url}/responses/{second['id']}/input_items", headers=AUTH, timeout=30
    ).json()["data"]
    outputs = [item for item in items if item["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [report["callId"]]
    assert json.loads(outputs[0]["output"]) == {"temperature_c": 21, "sky": "clear"}


def test_second_turn_keeps_context(keyed: Server, tmp_path: Path) -> None:
    report = drive(keyed, "chain", tmp_path)
    first = stored(keyed, report["first"]["responseId"])
    second = stored(keyed, report["second"]["responseId"])
    assert second["previous_response_id"] == first["id"]
    # Its prompt held the whole first turn (a shorter question alone would cost fewer tokens).
    earlier = first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
    assert second["usage"]["input_tokens"] > earlier
    items = httpx.get(
        f"{keyed.base_url}/responses/{second['id']}/input_items", headers=AUTH, timeout=30
    ).json()["data"]
    messages = [item for item in items if item["type"] == "message"]
    assert "What is my name?" in [part["text"] for item in messages for part in item["content"]]


def test_invalid_key_shows_the_servers_error(keyed: Server, tmp_path: Path) -> None:
    report = drive(keyed, "badkey", tmp_path)
    reply = httpx.post(
        f"{keyed.base_url}/responses",
        json={"input": "Hello?"},
        headers={"Authorization": "Bearer wrong-key"},
    )
    assert reply.status_code == 401
    assert report["message"] == reply.json()["error"]["message"]
    assert "HTTP 401" in report["meta"] and "invalid_api_key" in report["meta"]
