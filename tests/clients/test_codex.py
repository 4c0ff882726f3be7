"""Codex CLI (npm `@openai/codex`, pinned in tests/clients/node) runs `codex exec` against respond.

Codex is configured the way its docs describe a custom provider: a throwaway CODEX_HOME
whose config.toml names a `model_providers.respond` entry with `wire_api = "responses"`,
`base_url` pointing at the server and `env_key` naming the variable that holds the key.
Codex's default tool set (function tools, a `namespace` of sub-agent tools, `web_search`)
and its request fields (store:false, include reasoning.encrypted_content,
prompt_cache_key, reasoning, client_metadata; over WebSocket a `generate: false` warm-up
chained with previous_response_id) are sent as Codex sends them.

Two settings keep the tiny bundled model's turn short and deterministic on two cores: a
one-line instructions file instead of Codex's 17 KB system prompt, and a server started
with `--temp 0` (Codex sends no temperature) and `-n 48`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.fake_server import start_fake_server
from tests.support.server import Server, start_server

NODE = Path(__file__).resolve().parent / "node"
CODEX = NODE / "node_modules" / ".bin" / "codex"
KEY = "codex-test-key"
PROMPT = "Reply with one word: yes or no?"
# A warning item Codex emits for any model it has no built-in metadata for.
METADATA_WARNING = f"Model metadata for `{BUNDLED_ALIAS}` not found"


@pytest.fixture(scope="module")
def codex_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if not CODEX.exists():
        pytest.fail("Codex CLI is not installed: run `make node-clients` (part of `make test`)")
    srv = start_server(
        Path(tmp_path_factory.mktemp("codex-server")),
        *("--threads", "2", "-n", "48", "--temp", "0", "--api-key", KEY),
    )
    yield srv
    srv.stop()


def codex_home(tmp: Path, server: Server, *, websockets: bool) -> Path:
    home = tmp / "codex-home"
    home.mkdir()
    instructions = home / "instructions.md"
    instructions.write_text("You are a coding agent in a terminal. Answer in one short sentence.\n")
    (home / "config.toml").write_text(
        f"""\
model = "{BUNDLED_ALIAS}"
model_provider = "respond"
model_instructions_file = "{instructions}"

[model_providers.respond]
name = "respond"
base_url = "{server.base_url}"
env_key = "RESPOND_API_KEY"
wire_api = "responses"
supports_websockets = {"true" if websockets else "false"}
# Fail fast: a protocol error must show, not be retried away.
request_max_retries = 0
stream_max_retries = 0
"""
    )
    return home


def run_codex(tmp: Path, server: Server, *, websockets: bool) -> tuple[list[dict[str, Any]], str]:
    work = tmp / "work"
    work.mkdir()
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp),
        "CODEX_HOME": str(codex_home(tmp, server, websockets=websockets)),
        "RESPOND_API_KEY": KEY,
    }
    done = subprocess.run(
        [str(CODEX), "exec", "--json", "--skip-git-repo-check", "-s", "read-only", PROMPT],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"codex exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return events, done.stderr


def assert_clean_turn(events: list[dict[str, Any]], stderr: str) -> None:
    kinds = [event["type"] for event in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, kinds
    assert "error" not in kinds, events
    errors = [
        event["item"]["message"]
        for event in events
        if event["type"] == "item.completed" and event["item"]["type"] == "error"
    ]
    assert all(message.startswith(METADATA_WARNING) for message in errors), errors
    messages = [
        event["item"]["text"]
        for event in events
        if event["type"] == "item.completed" and event["item"]["type"] == "agent_message"
    ]
    assert messages and messages[-1].strip()
    for trouble in ("Reconnecting", "stream error", "Falling back", "ERROR"):
        assert trouble not in stderr, stderr


def test_codex_exec_over_http(codex_server: Server, tmp_path: Path) -> None:
    events, stderr = run_codex(tmp_path, codex_server, websockets=False)
    assert_clean_turn(events, stderr)
    assert "POST /v1/responses 200" in codex_server.log()


def test_codex_exec_over_websocket(codex_server: Server, tmp_path: Path) -> None:
    log = codex_server.log()
    sockets, posts = log.count("WS /v1/responses"), log.count("POST /v1/responses")
    events, stderr = run_codex(tmp_path, codex_server, websockets=True)
    assert_clean_turn(events, stderr)
    # The warm-up (generate: false) and the turn chained to it, both over the socket.
    log = codex_server.log()
    assert log.count("WS /v1/responses") >= sockets + 2
    assert log.count("POST /v1/responses") == posts, "Codex fell back to HTTP"


def test_codex_shows_reasoning_from_a_thinking_model(tmp_path: Path) -> None:
    """A model that thinks (the FAKE scripted engine writes a <think> block): Codex, told to
    show raw reasoning, prints the reasoning text it received before the answer."""
    thought = "The user asks yes or no. Say yes."
    script = [[{"raw": f"<think>{thought}</think>\n\nYes."}]]
    server, _ = start_fake_server(tmp_path / "server", script)
    try:
        home = codex_home(tmp_path, server, websockets=False)
        config = home / "config.toml"
        config.write_text(
            config.read_text()
            .replace(f'model = "{BUNDLED_ALIAS}"', 'model = "fake-model"')
            .replace("model_provider =", "show_raw_agent_reasoning = true\nmodel_provider =")
        )
        work = tmp_path / "work"
        work.mkdir()
        done = subprocess.run(
            [str(CODEX), "exec", "--skip-git-repo-check", "-s", "read-only", PROMPT],
            cwd=work,
            env={
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": str(tmp_path),
                "CODEX_HOME": str(home),
                "RESPOND_API_KEY": KEY,
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        server.stop()
    assert done.returncode == 0, f"codex exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    shown = done.stdout + done.stderr
    assert thought in shown, shown
    assert shown.index(thought) < shown.rindex("Yes.")
