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

With an MCP server configured (`@modelcontextprotocol/server-everything` over stdio, as
`mcp_servers` in config.toml) Codex sends the server's tools as a `namespace` tool whose
description is the server's instructions: the bundled model's prompt holds them, and a call
of one (scripted by the FAKE engine: the tiny model picks no tool by itself) comes back to
Codex as the namespace's call, which Codex runs on the MCP server and answers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.fake_searxng import FakeSearxng, flags
from tests.support.fake_server import recorded_turns, start_fake_server
from tests.support.server import Server, start_server

NODE = Path(__file__).resolve().parent / "node"
CODEX = NODE / "node_modules" / ".bin" / "codex"
EVERYTHING = NODE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
# Two of the everything server's 15 tools: Codex's prompt with all of them would not fit the
# bundled model's 8k window.
MCP_TOOLS = ("echo", "get-sum")
NAMESPACE = "mcp__everything"  # the namespace Codex puts the `everything` server's tools in
KEY = "codex-test-key"
PROMPT = "Reply with one word: yes or no?"
# A warning item Codex emits for any model it has no built-in metadata for.
METADATA_WARNING = "Model metadata for `{}` not found"


@pytest.fixture(scope="module")
def codex_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if not CODEX.exists():
        pytest.fail("Codex CLI is not installed: run `make node-clients` (part of `make test`)")
    # Codex's tools (shell, apply_patch, its namespaces) reach the model: its first prompt is
    # about 5,300 tokens, so the model's whole 8k window, in one slot.
    srv = start_server(
        Path(tmp_path_factory.mktemp("codex-server")),
        *("--threads", "2", "-n", "48", "--temp", "0", "--api-key", KEY, "-c", "8192", "-np", "1"),
    )
    yield srv
    srv.stop()


def codex_home(
    tmp: Path,
    server: Server,
    *,
    websockets: bool,
    model: str = BUNDLED_ALIAS,
    mcp: bool = False,
    web_search: str | None = None,
) -> Path:
    home = tmp / "codex-home"
    home.mkdir()
    instructions = home / "instructions.md"
    instructions.write_text("You are a coding agent in a terminal. Answer in one short sentence.\n")
    (home / "config.toml").write_text(
        f"""\
model = "{model}"
model_provider = "respond"
model_instructions_file = "{instructions}"
{f'web_search = "{web_search}"' if web_search else ""}

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
        + (mcp_config() if mcp else "")
    )
    return home


def mcp_config() -> str:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        pytest.fail("node or server-everything is not installed: run `make node-clients`")
    return f"""
[mcp_servers.everything]
command = "{node}"
args = ["{EVERYTHING / "index.js"}", "stdio"]
enabled_tools = {json.dumps(list(MCP_TOOLS))}
startup_timeout_sec = 60
# Codex waits for a required server before its first request; else it may go without it.
required = true

# Without Codex's sub-agent namespace and goal tools the prompt is about 3,000 tokens
# shorter, which the tiny model on two cores needs; the server's is the only namespace.
[features]
goals = false

[agents]
enabled = false
"""


def run_codex(
    tmp: Path,
    server: Server,
    *,
    websockets: bool,
    model: str = BUNDLED_ALIAS,
    mcp: bool = False,
    web_search: str | None = None,
    prompt: str = PROMPT,
) -> tuple[list[dict[str, Any]], str]:
    work = tmp / "work"
    work.mkdir()
    home = codex_home(
        tmp, server, websockets=websockets, model=model, mcp=mcp, web_search=web_search
    )
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp),
        "CODEX_HOME": str(home),
        "RESPOND_API_KEY": KEY,
    }
    done = subprocess.run(
        [str(CODEX), "exec", "--json", "--skip-git-repo-check", "-s", "read-only", prompt],
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


def assert_clean_turn(
    events: list[dict[str, Any]], stderr: str, *, model: str = BUNDLED_ALIAS
) -> None:
    kinds = [event["type"] for event in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, kinds
    assert "error" not in kinds, events
    errors = [
        event["item"]["message"]
        for event in events
        if event["type"] == "item.completed" and event["item"]["type"] == "error"
    ]
    warning = METADATA_WARNING.format(model)
    assert all(message.startswith(warning) for message in errors), errors
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


def everything_listing() -> tuple[str, dict[str, str]]:
    """The everything server's instructions and its tools' descriptions, asked over stdio
    (newline-delimited JSON-RPC) the way Codex asks them."""
    node = shutil.which("node")
    assert node is not None
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    answers: dict[int, Any] = {}
    with subprocess.Popen(
        [node, str(EVERYTHING / "index.js"), "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
            server.stdin.flush()
            while len(answers) < 2:
                message = json.loads(server.stdout.readline())
                if message.get("id") in (1, 2):
                    answers[message["id"]] = message["result"]
        finally:
            server.kill()
    tools = {tool["name"]: tool["description"] for tool in answers[2]["tools"]}
    return answers[1]["instructions"], tools


def logged_prompts(log: str) -> list[str]:
    """The prompts the embedded engine logged at debug: each runs to the next log line."""
    parts = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )", log)
    return [part for part in parts if " DEBUG respond.engine: prompt, " in part]


def test_codex_shows_an_mcp_servers_tools_to_the_model(tmp_path: Path) -> None:
    """Codex sends the everything server's tools as a namespace: the bundled model's
    prompt (logged at `--log-level debug`) holds each tool, its description naming the
    namespace, and the server's instructions (the namespace's description), once."""
    instructions, described = everything_listing()
    server = start_server(
        tmp_path / "server",
        *("--threads", "2", "-n", "48", "--temp", "0", "--api-key", KEY, "-c", "8192"),
        *("-np", "1", "--log-level", "debug"),
    )
    try:
        events, stderr = run_codex(tmp_path, server, websockets=False, mcp=True)
        log = server.log()
    finally:
        server.stop()
    assert_clean_turn(events, stderr)
    (prompt,) = logged_prompts(log)
    for name in MCP_TOOLS:
        # As the chat template writes the function: its description in a JSON string.
        shown = json.dumps(f"{described[name]}\n\nPart of {NAMESPACE}.", ensure_ascii=False)
        assert shown in prompt, (name, prompt)
    assert prompt.count(f"- {NAMESPACE}: {instructions.strip()}") == 1, prompt


def test_codex_runs_a_namespaced_mcp_call(tmp_path: Path) -> None:
    """The FAKE scripted engine calls `echo` (the name the model sees the namespace's
    member by): respond returns it as a `function_call` with `namespace`, Codex runs it on
    the everything server and sends its `function_call_output` back, which respond
    accepts and shows the model, whose answer ends the turn."""
    message = "hello from respond"
    script = [
        [{"call": "echo", "arguments": json.dumps({"message": message})}],
        [{"text": "Echoed."}],
    ]
    server, record = start_fake_server(tmp_path / "server", script)
    try:
        events, stderr = run_codex(tmp_path, server, websockets=False, model="fake-model", mcp=True)
    finally:
        server.stop()
    assert_clean_turn(events, stderr, model="fake-model")
    items = [event["item"] for event in events if event["type"] == "item.completed"]
    calls = [item for item in items if item["type"] == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [
        ("everything", "echo", "completed")
    ], calls
    assert [item["text"] for item in items if item["type"] == "agent_message"] == ["Echoed."]
    first, second = recorded_turns(record)
    assert "echo" in first["tools"]
    assert f"- {NAMESPACE}: " in first["messages"][0]["content"]  # the system prompt
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(answers) == 1 and f"Echo: {message}" in answers[0]["content"], answers


def test_codex_exec_with_live_web_search_runs_respond_s_search(
    tmp_path: Path, searxng: FakeSearxng
) -> None:
    """`codex exec` with `web_search = "live"` sends its web_search tool; respond, started
    with the FAKE SearXNG as its search provider, offers it to the model, and the search
    the FAKE scripted engine makes (the tiny model searches by no choice of its own) runs
    inside the response: Codex gets a web_search_call, then the answer."""
    query = "capital of France"
    script = [
        [{"call": "web_search", "arguments": json.dumps({"query": query})}],
        [{"text": "Paris, says https://blog.example.net/capital-of-france"}],
    ]
    server, record = start_fake_server(tmp_path / "server", script, flags=flags(searxng))
    try:
        events, stderr = run_codex(
            tmp_path,
            server,
            websockets=False,
            model="fake-model",
            web_search="live",
            prompt="What is the capital of France? Search the web.",
        )
    finally:
        server.stop()
    assert_clean_turn(events, stderr, model="fake-model")
    assert searxng.queries == [query]
    first, second = recorded_turns(record)
    # Live: the search and the page tools (cached search offers the search alone).
    assert {"web_search", "open_page", "find_in_page"} <= set(first["tools"]), first["tools"]
    told = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(told) == 1 and "https://blog.example.net/capital-of-france" in told[0]["content"]
    items = [event["item"] for event in events if event["type"] == "item.completed"]
    searched = [item for item in items if item["type"] == "web_search"]
    assert [item.get("query") for item in searched] == [query], items
    assert [item["text"] for item in items if item["type"] == "agent_message"] == [
        script[1][0]["text"]
    ]
