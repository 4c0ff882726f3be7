"""Which MCP server URLs respond may connect to.

By default: only the servers the operator configured. Everything else must be admitted by
an allow pattern (`--mcp-allow PATTERN`, or `allow = [...]` under `[mcp]` in the config
file). There are two kinds of pattern, told apart by `://`:

- a host pattern (`*.corp.example`, `mcp.example.com`) is a shell wildcard matched against
  the URL's host only, never against its path, query or userinfo: so `*.corp.example`
  does not admit `http://0.0.0.0:8000/mcp?x=.corp.example`;
- a URL pattern (`https://mcp.example.com/mcp`) admits URLs with the same scheme, host
  (a wildcard allowed) and port, whose path is the pattern's path or below it on a `/`
  boundary (`/mcp` admits `/mcp` and `/mcp/v1`, not `/mcpx`; a trailing `*` is the same as
  a trailing `/`).

Loopback (localhost, 127.0.0.0/8, ::1, and 0.0.0.0 / ::, which reach the host too) is
refused whatever the patterns say, unless the operator turns it on (`--mcp-allow-loopback`)
or it is a configured server's URL: services on the host's loopback are not meant for
every tenant's requests. A DNS name is judged by its name; respond does not resolve it here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from fnmatch import fnmatchcase
from urllib.parse import SplitResult, unquote, urlsplit

from respond.protocol.errors import APIError

__all__ = ["Egress", "loopback"]

DEFAULT_PORTS = {"http": 80, "https": 443}


class Egress:
    def __init__(
        self,
        patterns: Iterable[str] = (),
        configured: Iterable[str] = (),
        *,
        allow_loopback: bool = False,
    ) -> None:
        self.patterns = tuple(patterns)
        self.configured = frozenset(url.rstrip("/") for url in configured)
        self.allow_loopback = allow_loopback

    def allows(self, url: str) -> bool:
        if url.rstrip("/") in self.configured:
            return True
        parts = _parts(url)
        if parts is None or _dot_segments(parts.path):
            return False
        host = (parts.hostname or "").lower()
        if loopback(host):
            return self.allow_loopback
        return self.matches(url)

    def matches(self, url: str) -> bool:
        """Whether a pattern admits `url`, whatever its host is (loopback too)."""
        parts = _parts(url)
        if parts is None or _dot_segments(parts.path):
            return False
        host = (parts.hostname or "").lower()
        return any(_matches(pattern, parts, host) for pattern in self.patterns)

    def check(self, url: str, param: str) -> None:
        """Raise a 400 that says how to allow `url`, unless it is allowed."""
        if self.allows(url):
            return
        parts = _parts(url)
        if parts is None:
            raise APIError(
                400,
                f"Invalid MCP server_url {url!r}: use an http:// or https:// URL with a host.",
                param=param,
                code="invalid_value",
            )
        host = (parts.hostname or "").lower()
        how = (
            "`respond serve --mcp-allow-loopback` (loopback is off by default)"
            if loopback(host)
            else f"`respond serve --mcp-allow '{host}'` (repeatable; a wildcard pattern over "
            "the host, or a URL prefix), or under [mcp] in the config file (allow = [...])"
        )
        raise APIError(
            400,
            f"respond may not connect to the MCP server at {url}: it is not on this server's "
            f"allow-list. The operator can allow it with {how}, or configure the server as "
            "[mcp.servers.NAME].",
            param=param,
            code="mcp_server_not_allowed",
        )


def _parts(url: str) -> SplitResult | None:
    """The URL split, or None when it is not http(s) with a host (or does not parse)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts


def _port(parts: SplitResult) -> int:
    return parts.port or DEFAULT_PORTS[parts.scheme]


def _dot_segments(path: str) -> bool:
    """`/mcp/../admin` would pass a `/mcp` prefix and reach `/admin`: such URLs are refused."""
    return any(segment in (".", "..") for segment in unquote(path).split("/"))


def _matches(pattern: str, parts: SplitResult, host: str) -> bool:
    if "://" not in pattern:
        return fnmatchcase(host, pattern.lower())
    want = _parts(pattern.removesuffix("*"))
    if want is None or want.scheme != parts.scheme or _port(want) != _port(parts):
        return False
    if not fnmatchcase(host, (want.hostname or "").lower()):
        return False
    prefix = want.path
    if prefix in ("", "/"):
        return True
    return parts.path == prefix.rstrip("/") or parts.path.startswith(prefix.rstrip("/") + "/")


def loopback(host: str) -> bool:
    """Names and addresses that reach this host. 0.0.0.0 and :: connect to it on Linux."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified
