"""MCP egress as the operator sets it (#32): a host pattern matches the host only, loopback
is off unless `--mcp-allow-loopback`, and a refused URL is never connected to.

A real respond with the defaults (loopback off) and `allow = ["*.corp.example"]`, and the
tests' real MCP server on 127.0.0.1, which the config also names as a configured server:
configured servers stay reachable on loopback. The switch turned on, and the error texts of
servers that cannot be listed, are in tests/e2e/test_mcp.py (whose respond allows loopback).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.clients import openai_client
from tests.support.mcp import McpTestServer, start_mcp_server
from tests.support.server import Server, start_server


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpTestServer]:
    server = start_mcp_server(Path(tmp_path_factory.mktemp("mcp-egress")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def respond(tmp_path_factory: pytest.TempPathFactory, mcp: McpTestServer) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("respond-egress"))
    config = tmp / "respond.toml"
    config.write_text(
        f"""
[mcp]
allow = ["*.corp.example"]

[mcp.servers.local]
url = "{mcp.url}"
require_approval = "never"
"""
    )
    server = start_server(tmp, "--threads", "2", "--config", str(config))
    yield server
    server.stop()


@pytest.fixture
def sdk(respond: Server) -> Iterator[openai.OpenAI]:
    client = openai_client(respond.base_url, timeout=600)
    yield client
    client.close()


def refused(sdk: openai.OpenAI, mcp: McpTestServer, url: str) -> str:
    """The 400's message for a request naming `url`; asserts nothing reached the server."""
    mark = len(mcp.requests())
    tool = {"type": "mcp", "server_label": "probe", "server_url": url}
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model=BUNDLED_ALIAS, input="hi", tools=[tool], max_output_tokens=1)  # type: ignore[list-item]
    body: Any = caught.value.body
    assert body["code"] == "mcp_server_not_allowed" and body["param"] == "tools[0].server_url"
    assert len(mcp.requests()) == mark, "respond connected to a URL it refused"
    return caught.value.message


def test_a_host_pattern_does_not_match_the_query(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    port = urlsplit(mcp.url).port
    # The probes of #32: both were admitted by `*.corp.example`, the first one connected.
    refused(sdk, mcp, f"http://0.0.0.0:{port}/mcp?x=.corp.example")
    refused(sdk, mcp, "http://169.254.169.254/latest/meta-data?.corp.example")
    refused(sdk, mcp, "http://169.254.169.254/x.corp.example")


def test_loopback_is_refused_unless_allowed(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    port = urlsplit(mcp.url).port
    # Not the configured server's URL (which is admitted): the same server by other paths.
    for url in (mcp.secure_url, f"http://localhost:{port}/mcp", f"http://[::1]:{port}/mcp"):
        assert "--mcp-allow-loopback" in refused(sdk, mcp, url)


def test_a_configured_server_on_loopback_is_still_listed(sdk: openai.OpenAI) -> None:
    response = sdk.responses.create(
        model=BUNDLED_ALIAS,
        input="hi",
        tools=[{"type": "mcp", "server_label": "local"}],
        max_output_tokens=1,
    )
    assert response.output[0].type == "mcp_list_tools"
