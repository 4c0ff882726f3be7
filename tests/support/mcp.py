"""Start the test MCP server (tests/support/mcp_server.py) and read what reached it."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.server import Server, start_server


@dataclass
class McpTestServer:
    server: Server
    nonce: str
    token: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"{self.server.url}/mcp"

    @property
    def secure_url(self) -> str:
        return f"{self.server.url}/secure/mcp"

    def requests(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text().splitlines()
        return [entry for entry in map(json.loads, lines) if "path" in entry]

    def notes(self) -> list[dict[str, Any]]:
        lines = self.log_path.read_text().splitlines() if self.log_path.exists() else []
        return [entry for entry in map(json.loads, lines) if "path" not in entry]

    def stop(self) -> None:
        self.server.stop()


def start_mcp_server(
    tmp: Path, *, transport: str = "streamable-http", sse_path: str = "/sse"
) -> McpTestServer:
    nonce = f"nonce-{secrets.token_hex(4)}"
    token = f"tok-{secrets.token_hex(8)}"
    log = tmp / f"mcp-{nonce}.jsonl"
    server = start_server(
        tmp,
        "--nonce",
        nonce,
        "--token",
        token,
        "--log",
        str(log),
        "--transport",
        transport,
        "--sse-path",
        sse_path,
        module=("-m", "tests.support.mcp_server"),
    )
    return McpTestServer(server=server, nonce=nonce, token=token, log_path=log)
