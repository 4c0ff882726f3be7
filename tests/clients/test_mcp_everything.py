"""A second, independent MCP server implementation: `@modelcontextprotocol/server-everything`
(the reference TypeScript server, pinned in tests/clients/node), over Streamable HTTP.

respond lists its tools and runs a forced call inside the response, driven by the openai
SDK, as with the tests' own Python server (tests/e2e/test_mcp.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support import processes
from tests.support.clients import openai_client
from tests.support.server import Server, free_port

NODE_DIR = Path(__file__).resolve().parent / "node"
EVERYTHING = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        pytest.fail("node or server-everything is not installed: run `make node-clients`")
    port = free_port()
    log = Path(tmp_path_factory.mktemp("everything")) / "server.log"
    with log.open("wb") as out:
        process = processes.spawn(
            [node, str(EVERYTHING / "dist" / "index.js"), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            log=out,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_listening(port, process, log)
        yield url
    finally:
        processes.stop(process)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server-everything exited:\n{log.read_text()}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"server-everything did not start:\n{log.read_text()}")


@pytest.fixture
def sdk(server: Server) -> Iterator[openai.OpenAI]:
    client = openai_client(server.base_url, timeout=600)
    yield client
    client.close()


def test_lists_and_runs_a_call_on_server_everything(sdk: openai.OpenAI, everything: str) -> None:
    response = sdk.responses.create(
        model=BUNDLED_ALIAS,
        input="Echo a greeting.",
        tools=[
            {
                "type": "mcp",
                "server_label": "everything",
                "server_url": everything,
                "require_approval": "never",
            }
        ],
        tool_choice={"type": "mcp", "server_label": "everything", "name": "echo"},
        parallel_tool_calls=False,
        max_tool_calls=1,
        max_output_tokens=48,
        temperature=0,
    ).model_dump(mode="json")
    listing, call = response["output"][:2]
    assert listing["type"] == "mcp_list_tools"
    names = {tool["name"] for tool in listing["tools"]}
    assert {"echo", "get-sum"} <= names
    assert call["type"] == "mcp_call" and call["name"] == "echo"
    message = json.loads(call["arguments"])["message"]
    assert call["output"] == f"Echo: {message}"
    assert response["status"] in ("completed", "incomplete")  # cut by max_output_tokens
