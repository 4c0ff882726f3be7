"""The MCP egress allow-list as a table: what each kind of pattern admits and refuses.

The rows are the examples docs/tools.md#egress gives, and the probes of issue #32: a host
pattern once matched the whole URL, so `*.corp.example` admitted any URL whose query ended
in `.corp.example`, the metadata address and 0.0.0.0 included.
"""

from __future__ import annotations

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import PARSE_ERROR

from respond.protocol.errors import APIError
from respond.responses.hosted._mcp_client import UNREACHABLE, _failure
from respond.responses.hosted.egress import Egress

HOST = "*.corp.example"
URL = "https://api.other.org/mcp"

ROWS = [
    # (pattern, url, admitted)
    (HOST, "https://tools.corp.example/mcp", True),
    (HOST, "http://a.b.corp.example:8080/any/path?q=1", True),
    (HOST, "https://TOOLS.Corp.Example/mcp", True),
    (HOST, "http://0.0.0.0:8000/mcp?x=.corp.example", False),
    (HOST, "http://169.254.169.254/latest/meta-data?.corp.example", False),
    (HOST, "http://169.254.169.254/x.corp.example", False),
    (HOST, "http://169.254.169.254#.corp.example", False),
    (HOST, "http://x.corp.example@169.254.169.254/mcp", False),
    (HOST, "https://corp.example.evil.net/mcp", False),
    (HOST, "https://corp.example/mcp", False),
    (HOST, "ftp://tools.corp.example/mcp", False),
    ("mcp.example.com", "https://mcp.example.com/sse", True),
    ("mcp.example.com", "https://mcp.example.com.evil.net/sse", False),
    (URL, "https://api.other.org/mcp", True),
    (URL, "https://api.other.org/mcp/v1", True),
    (URL, "https://api.other.org:443/mcp?x=1", True),
    (URL, "https://api.other.org/mcpx", False),
    (URL, "https://api.other.org/admin", False),
    (URL, "https://api.other.org/mcp/../admin", False),
    (URL, "https://api.other.org/mcp/%2e%2e/admin", False),
    (URL, "http://api.other.org/mcp", False),
    (URL, "https://api.other.org:8443/mcp", False),
    (URL, "https://api.other.org.evil.net/mcp", False),
    (URL, "https://evil.net/?https://api.other.org/mcp", False),
    (URL + "/*", "https://api.other.org/mcp/v1", True),
    (URL + "/*", "https://api.other.org/admin", False),
    ("https://*.corp.example/mcp", "https://a.corp.example/mcp", True),
    ("https://*.corp.example/mcp", "https://a.corp.example/other", False),
    ("http://tools.corp.example:8080/", "http://tools.corp.example:8080/anything", True),
    ("http://tools.corp.example:8080/", "http://tools.corp.example/anything", False),
    # No pattern admits loopback: only --mcp-allow-loopback does.
    ("*", "http://127.0.0.1:9000/mcp", False),
    ("*", "http://0.0.0.0:9000/mcp", False),
    ("*", "http://[::ffff:127.0.0.1]:9000/mcp", False),
    ("http://127.0.0.1:9000/", "http://127.0.0.1:9000/mcp", False),
]


@pytest.mark.parametrize(("pattern", "url", "admitted"), ROWS)
def test_the_allow_list_table(pattern: str, url: str, admitted: bool) -> None:
    assert Egress([pattern]).allows(url) is admitted


LOOPBACK = [
    "http://127.0.0.1:9000/mcp",
    "http://127.1.2.3/mcp",
    "http://localhost:9000/mcp",
    "http://mcp.localhost/mcp",
    "http://[::1]:9000/mcp",
    "http://0.0.0.0:9000/mcp",
    "http://[::]:9000/mcp",
    "http://[::ffff:127.0.0.1]:9000/mcp",
]


@pytest.mark.parametrize("url", LOOPBACK)
def test_loopback_only_when_the_operator_says_so(url: str) -> None:
    assert not Egress().allows(url)
    assert Egress(allow_loopback=True).allows(url)
    with pytest.raises(APIError) as caught:
        Egress().check(url, "tools[0].server_url")
    assert "--mcp-allow-loopback" in caught.value.message


def test_configured_servers_are_admitted_loopback_or_not() -> None:
    egress = Egress(configured=["https://tools.corp.example/mcp", "http://127.0.0.1:9000/mcp"])
    assert egress.allows("https://tools.corp.example/mcp")
    assert egress.allows("http://127.0.0.1:9000/mcp")
    assert not egress.allows("https://tools.corp.example/other")
    assert not egress.allows("http://127.0.0.1:9001/mcp")
    assert not egress.allows("https://mcp.example.com/mcp")
    assert not egress.allows("file:///etc/passwd")


def test_a_refused_url_says_how_to_allow_it() -> None:
    with pytest.raises(APIError) as caught:
        Egress().check("https://mcp.example.com/mcp", "tools[0].server_url")
    error = caught.value
    assert error.status == 400
    assert error.param == "tools[0].server_url"
    assert error.code == "mcp_server_not_allowed"
    assert "--mcp-allow 'mcp.example.com'" in error.message
    with pytest.raises(APIError) as invalid:
        Egress().check("file:///etc/passwd", "tools[0].server_url")
    assert invalid.value.code == "invalid_value"


# ---------------------------------------------------------------- what a failed call says


def test_a_call_failure_names_the_status_or_error_but_never_what_the_far_end_wrote() -> None:
    """Calls report an HTTP status (with its standard phrase, not the server's own) or the
    server's MCP error; errors the mcp client makes from an answer it could not parse
    (they quote the body) read as "could not reach the MCP server", as does anything else."""
    secret = "internal-service-secret"
    request = httpx2.Request("POST", "http://mcp.corp.example/mcp")
    response = httpx2.Response(500, request=request, extensions={"reason_phrase": secret.encode()})
    status = httpx2.HTTPStatusError(secret, request=request, response=response)
    cases = {
        "HTTP status code: 500 (Internal Server Error)": status,
        "Unknown tool: x (MCP error -32602)": MCPError(-32602, "Unknown tool: x"),
        UNREACHABLE: MCPError(PARSE_ERROR, f"Failed to parse JSON response: {secret}"),
    }
    for expected, exc in cases.items():
        error = _failure(ExceptionGroup("task group", [exc])).error
        assert error is not None and error["message"] == expected
    assert _failure(httpx2.ConnectError(secret)).error == {
        "type": "mcp_protocol_error",
        "code": -32000,
        "message": UNREACHABLE,
    }
