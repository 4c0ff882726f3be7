"""A real MCP server for the tests: the `mcp` package's MCPServer (FastMCP) on loopback.

    python -m tests.support.mcp_server --host 127.0.0.1 --port N --nonce X --token T --log F

Deterministic tools: `get_nonce` returns the per-test nonce, `add` adds, `explode` raises,
`slow` sleeps `--slow-seconds` (and logs whether it finished or was cancelled).
Streamable HTTP at /mcp, the same tools behind a bearer token at /secure/mcp (401 without
it), or with `--transport sse` the older SSE transport at /sse (or `--sse-path`). Every
request's method, path and headers are appended to the log file (JSON lines), so tests can
see what reached the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

Scope = dict[str, Any]


def build(nonce: str, log: Path, slow_seconds: float = 30.0) -> MCPServer:
    server = MCPServer("respond-tests")

    @server.tool(
        description="Returns the secret word of this test.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def get_nonce() -> str:
        return nonce

    @server.tool(description="Adds two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Always fails.")
    def explode() -> str:
        raise ToolError(f"explode failed on purpose ({nonce})")

    @server.tool(description="Takes a long time.")
    async def slow() -> str:
        _note(log, {"slow": "started"})
        try:
            await asyncio.sleep(slow_seconds)
        except asyncio.CancelledError:
            _note(log, {"slow": "cancelled"})
            raise
        _note(log, {"slow": "finished"})
        return "slept"

    return server


def _note(log: Path, entry: dict[str, Any]) -> None:
    with log.open("a") as file:
        file.write(json.dumps(entry) + "\n")


class Gate:
    """Logs each request; /health answers 200; /secure/... needs the bearer token."""

    def __init__(self, app: Any, token: str, log: Path) -> None:
        self.app, self.token, self.log = app, token, log

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        _note(self.log, {"method": scope["method"], "path": path, "headers": headers})
        if path == "/health":
            await _answer(send, 200, b"ok")
            return
        if path.startswith("/secure/"):
            if headers.get("authorization") != f"Bearer {self.token}":
                await _answer(send, 401, b"unauthorized")
                return
            scope = {**scope, "path": path.removeprefix("/secure"), "raw_path": None}
        await self.app(scope, receive, send)


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--nonce", required=True)
    parser.add_argument("--token", default="test-token")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    parser.add_argument(
        "--transport", choices=["streamable-http", "sse"], default="streamable-http"
    )
    parser.add_argument("--sse-path", default="/sse", help="where the SSE transport listens")
    args = parser.parse_args()
    server = build(args.nonce, args.log, args.slow_seconds)
    if args.transport == "sse":
        app = server.sse_app(sse_path=args.sse_path)
    else:
        app = server.streamable_http_app()
    gate = Gate(app, args.token, args.log)
    uvicorn.run(gate, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
