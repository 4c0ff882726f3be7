"""The pages web_search opens (`open_page`, `find_in_page`), fetched by respond itself.

A page is fetched only from a public host: its name is resolved first, and a host on
loopback, a private network, link-local or any other address that is not globally
routable is refused unless the operator allows it (`--web-search-allow-private`): a
request must not reach the services beside respond. respond then connects to the address
it judged (a second lookup could answer another). Redirects are followed by hand, each
hop judged the same way; proxies in the environment are not used. A page is cut at
MAX_BYTES and must come within the timeout; only text is read (HTML as its visible text).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from respond.responses.hosted.egress import loopback

__all__ = ["MAX_BYTES", "Page", "PageError", "fetch"]

MAX_BYTES = 2 << 20
MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")


class PageError(Exception):
    """The page cannot be had: refused by the egress rules, down, too slow, not text."""


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    title: str
    text: str


async def fetch(url: str, *, timeout: float, allow_private: bool) -> Page:
    """The page at `url`, as text. Raises PageError saying why not."""
    try:
        with anyio.fail_after(timeout):
            async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    target = await _target(url, allow_private)
                    async with client.stream(
                        "GET",
                        target.url,
                        headers={**_HEADERS, **target.headers},
                        extensions=target.extensions,
                    ) as reply:
                        if reply.is_redirect:
                            url = urljoin(url, reply.headers.get("location", ""))
                            continue
                        return await _read(url, reply)
    except TimeoutError:
        raise PageError(f"the page did not come within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise PageError(f"the page could not be fetched: {exc}") from exc
    raise PageError(f"the page redirects more than {MAX_REDIRECTS} times")


_HEADERS = {
    "User-Agent": "respond-web-search/1 (+https://github.com/respond)",
    "Accept": "text/html, text/plain;q=0.9, */*;q=0.1",
}


@dataclass(frozen=True)
class _Target:
    """What respond connects to for a URL: the address it judged, not a name resolved
    again (which could then answer another address), with the name as the Host header and
    TLS server name."""

    url: str
    headers: dict[str, str]
    extensions: dict[str, str]


async def _target(url: str, allow_private: bool) -> _Target:
    """`url` pinned to a public address of its host; refused unless it is http(s) to a
    public host (any host when private hosts are allowed: then it is not pinned)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PageError(f"not a URL: {url[:200]!r}") from None
    host = (parts.hostname or "").lower().rstrip(".")  # "localhost." is localhost
    if parts.scheme not in ("http", "https") or not host:
        raise PageError(f"only http(s) pages can be opened, not {url[:200]!r}")
    if allow_private:
        return _Target(url, {}, {})
    refused = (
        f"respond may not open {url[:200]}: its host is not public (loopback, private or "
        "link-local); the operator can allow it with --web-search-allow-private"
    )
    if loopback(host):
        raise PageError(refused)
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise PageError(f"the host {host} is not known: {exc}") from None
    addresses = []
    for *_, address in found:
        ip = ipaddress.ip_address(str(address[0]).split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if not ip.is_global:
            raise PageError(refused)
        addresses.append(ip)
    pinned = f"[{addresses[0]}]" if addresses[0].version == 6 else str(addresses[0])
    named = f"[{host}]" if ":" in host else host
    netloc = named if parts.port is None else f"{named}:{parts.port}"
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return _Target(parts._replace(netloc=f"{pinned}:{port}").geturl(), {"Host": netloc}, extensions)


async def _read(url: str, reply: httpx.Response) -> Page:
    if reply.status_code != 200:
        raise PageError(f"the page answered HTTP {reply.status_code}")
    kind = reply.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    if not kind.startswith(_TEXT_TYPES):
        raise PageError(f"the page is not text ({kind})")
    body = bytearray()
    async for chunk in reply.aiter_bytes():
        body += chunk
        if len(body) >= MAX_BYTES:
            del body[MAX_BYTES:]  # a page is read this far, no further
            break
    text = bytes(body).decode(reply.encoding or "utf-8", errors="replace")
    if kind in ("text/html", "application/xhtml+xml"):
        return _html(url, text)
    return Page(url=url, title=url, text=text)


_SKIPPED = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCKS = {
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
    "footer", "nav", "main", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "title",
}  # fmt: skip


class _Text(HTMLParser):
    """An HTML page's visible text, a line per block, and its title."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.skipping = 0
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in _SKIPPED:
            self.skipping += 1
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _SKIPPED and self.skipping:
            self.skipping -= 1
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        elif not self.skipping:
            self.parts.append(data)


def _html(url: str, html: str) -> Page:
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    text = "\n".join(line for line in lines if line)
    return Page(url=url, title=" ".join(parser.title.split()) or url, text=text)
