"""One remote MCP server, reached with the official `mcp` package's client.

Streamable HTTP first; a server that answers it with 404/405 (one that only offers the
older SSE transport), or a URL ending in `/sse`, is spoken to over SSE (the MCP
specification's backwards-compatibility rule). Each list or call opens its own short
session: nothing is held between requests, so a background run or another replica needs
no connection state. A call's session is told the tools the response already listed, so
calling never lists them again.

Headers (authorization included) go to this server only and are never logged: errors
are reported by status and message, not by the request that caused them.

What a failure tells the client is kept small on purpose, since a server URL is the
client's choice: a listing that fails for any reason (refused, reset, timed out, not HTTP,
HTTP but not MCP) is "could not reach the MCP server", so a request cannot tell a closed
port from an open one, and nothing the far end sent (a body, a reason phrase) is echoed.
Calls, which only reach a server that was listed, add the HTTP status or the MCP error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from http import HTTPStatus
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, PARSE_ERROR

from respond import _model_json as model_json
from respond.protocol.items import McpToolInfo
from respond.responses.hosted_call import CallResult

__all__ = ["UNREACHABLE", "McpClient", "McpUnavailable"]

log = logging.getLogger("respond.mcp")

# MCP's JSON-RPC code for a request that timed out.
REQUEST_TIMEOUT = -32001
METHOD_NOT_FOUND = -32601
CONNECT_SECONDS = 10.0
# The answers to a POSTed `initialize` that mean "not Streamable HTTP here": the MCP
# specification says to try the older SSE transport on a 4xx (405 and 404 in its examples;
# some servers say 400). Auth failures (401, 403) are not: SSE would be refused the same.
FALLBACK_STATUSES = (400, 404, 405)
UNREACHABLE = "could not reach the MCP server"
# Errors the mcp client makes up itself, whose messages quote what the far end sent (the
# body that did not parse, its content type): never passed on.
SYNTHESIZED = (PARSE_ERROR, INVALID_REQUEST)


class McpUnavailable(Exception):
    """The server could not be reached, or refused the request (the message says how)."""


class McpClient:
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        known: Sequence[McpToolInfo] = (),
    ) -> None:
        self.url = url
        self._headers = dict(headers)
        self.timeout = timeout
        self._known = mcp_types.ListToolsResult(tools=[_tool(info) for info in known])

    async def list_tools(self) -> list[McpToolInfo]:
        """The server's tools; raises McpUnavailable."""
        try:
            with anyio.fail_after(self.timeout):
                async with self._session() as client:
                    listed = await client.list_tools()
        except Exception as exc:  # TimeoutError included: a silent port is not told apart
            log.info("listing the MCP server's tools failed: %s", _describe(exc))
            raise McpUnavailable(UNREACHABLE) from None
        return [_tool_info(tool) for tool in listed.tools]

    async def call(self, name: str, arguments: str) -> CallResult:
        """Run one call; every failure is a CallResult with an error, never an exception
        (cancellation excepted: it stops the call)."""
        try:
            parsed = model_json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return _execution_error("The arguments are not a JSON object.")
        try:
            with anyio.fail_after(self.timeout):
                async with self._session() as client:
                    _tell_tools(client, self._known)
                    result = await client.call_tool(name, parsed)
        except TimeoutError:
            message = f"The MCP tool call timed out after {self.timeout:g}s."
            return CallResult(
                error={"type": "mcp_protocol_error", "code": REQUEST_TIMEOUT, "message": message}
            )
        except Exception as exc:
            return _failure(exc)
        text = _content_text(result.content)
        if result.is_error:
            return CallResult(
                error={"type": "mcp_tool_execution_error", "content": _content(result.content)},
                output=text or None,
            )
        return CallResult(output=text)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Client]:
        if self.url.rstrip("/").endswith("/sse"):
            async with self._sse() as client:
                yield client
            return
        async with AsyncExitStack() as stack:
            first = _FirstAnswer()
            try:
                client = await stack.enter_async_context(self._streamable(first))
            except Exception as exc:
                # `initialize` POSTed and refused: a server that only speaks SSE.
                if not (first.status in FALLBACK_STATUSES or _refused(exc)):
                    raise
                client = await stack.enter_async_context(self._sse())
            yield client

    @asynccontextmanager
    async def _streamable(self, first: _FirstAnswer) -> AsyncIterator[Client]:
        timeout = httpx2.Timeout(CONNECT_SECONDS, read=self.timeout)
        hooks: dict[str, list[Callable[..., Any]]] = {"response": [first]}
        async with (
            httpx2.AsyncClient(headers=self._headers, timeout=timeout, event_hooks=hooks) as http,
            Client(streamable_http_client(self.url, http_client=http), cache=None) as client,
        ):
            yield client

    @asynccontextmanager
    async def _sse(self) -> AsyncIterator[Client]:
        transport = sse_client(
            self.url, headers=self._headers, timeout=CONNECT_SECONDS, sse_read_timeout=self.timeout
        )
        async with Client(transport, cache=None, mode="legacy") as client:
            yield client


class _FirstAnswer:
    """An httpx response hook keeping the status of a session's first answer: the mcp
    client reports a refused `initialize` (405, 400) as a JSON-RPC internal error, without
    the status the fallback to SSE is decided by."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if self.status is None:
            self.status = response.status_code


def _tell_tools(client: Client, listing: mcp_types.ListToolsResult) -> None:
    """Give a new session the listing the response already holds. Otherwise the mcp client
    lists the tools again inside `call_tool` (to validate structured output against output
    schemas, which respond does not read): a round trip per call, and a list that may have
    changed under the stored one a chain keeps (OpenAI lists once per chain). The mcp
    package (pinned) has no public way to say it; tests/e2e/test_mcp.py counts the lists."""
    client.session._absorb_tool_listing(listing, complete=True)


def _tool(info: McpToolInfo) -> mcp_types.Tool:
    return mcp_types.Tool(
        name=info.name, description=info.description, input_schema=dict(info.input_schema)
    )


def _tool_info(tool: mcp_types.Tool) -> McpToolInfo:
    annotations = (
        tool.annotations.model_dump(exclude_none=True, by_alias=True) if tool.annotations else None
    )
    return McpToolInfo(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=annotations or None,
    )


def _content(blocks: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", exclude_none=True, by_alias=True) for block in blocks]


def _content_text(blocks: list[Any]) -> str:
    """The call's output as the model and the `mcp_call` item see it: text blocks joined,
    other blocks (images, resources) as their JSON."""
    parts = []
    for block in blocks:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        else:
            parts.append(json.dumps(block.model_dump(mode="json", exclude_none=True)))
    return "\n".join(parts)


def _execution_error(message: str) -> CallResult:
    return CallResult(
        error={"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": message}]}
    )


def _failure(exc: BaseException) -> CallResult:
    status = _status(exc)
    if status is not None:
        return CallResult(error={"type": "http_error", "code": status, "message": _describe(exc)})
    return CallResult(
        error={"type": "mcp_protocol_error", "code": -32000, "message": _describe(exc)}
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups of the client's task groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _refused(exc: BaseException) -> bool:
    for leaf in _leaves(exc):
        if isinstance(leaf, MCPError) and leaf.error.code == METHOD_NOT_FOUND:
            return True  # how the streamable HTTP transport reports a 404 or 405
    return _status(exc) in (404, 405)


def _status(exc: BaseException) -> int | None:
    for leaf in _leaves(exc):
        if isinstance(leaf, httpx2.HTTPStatusError):
            return leaf.response.status_code
    return None


def _describe(exc: BaseException) -> str:
    """A message naming what failed, without the request (whose headers are secret) or
    anything the far end wrote (its body, its reason phrase)."""
    for leaf in _leaves(exc):
        if isinstance(leaf, httpx2.HTTPStatusError):
            return f"HTTP status code: {_phrase(leaf.response.status_code)}"
        if isinstance(leaf, MCPError) and leaf.error.code not in SYNTHESIZED:
            return f"{leaf.error.message} (MCP error {leaf.error.code})"
    log.debug("MCP request failed: %s", type(_leaves(exc)[0]).__name__)
    return UNREACHABLE


def _phrase(status: int) -> str:
    """The standard reason phrase: the one the server sent is its own text."""
    try:
        return f"{status} ({HTTPStatus(status).phrase})"
    except ValueError:
        return str(status)
