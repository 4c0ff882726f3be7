"""Which MCP server URLs respond may connect to.

By default: the servers the operator configured, and loopback. Everything else must be
admitted by an allow pattern (`--mcp-allow PATTERN`, or `allow = [...]` under `[mcp]` in
the config file). A pattern is a shell-style wildcard matched against the whole URL
(`https://mcp.example.com/*`) or against its host (`*.example.com`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from respond.protocol.errors import APIError

__all__ = ["Egress"]


class Egress:
    def __init__(self, patterns: Iterable[str] = (), configured: Iterable[str] = ()) -> None:
        self.patterns = tuple(patterns)
        self.configured = frozenset(url.rstrip("/") for url in configured)

    def allows(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            return False
        if url.rstrip("/") in self.configured or _loopback(host):
            return True
        return any(fnmatchcase(url, p) or fnmatchcase(host, p.lower()) for p in self.patterns)

    def check(self, url: str, param: str) -> None:
        """Raise a 400 that says how to allow `url`, unless it is allowed."""
        if self.allows(url):
            return
        if urlsplit(url).scheme not in ("http", "https"):
            raise APIError(
                400,
                f"Invalid MCP server_url {url!r}: use an http:// or https:// URL.",
                param=param,
                code="invalid_value",
            )
        host = urlsplit(url).hostname or url
        raise APIError(
            400,
            f"respond may not connect to the MCP server at {url}: it is not on this server's "
            f"allow-list. The operator can allow it with `respond serve --mcp-allow '{host}'` "
            "(repeatable; a wildcard pattern over the URL or its host), or under [mcp] in the "
            "config file (allow = [...]), or configure the server as [mcp.servers.NAME].",
            param=param,
            code="mcp_server_not_allowed",
        )


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
