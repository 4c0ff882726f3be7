"""The playground: a static page at `/` and `/playground`, talking only to this server.

The HTML is never cached stale (`no-cache` with an ETag); it names its assets under a
path holding their content digest, so assets are cached for good (`immutable`) and a new
version of respond is a new path. Every answer carries a strict Content-Security-Policy:
scripts, styles and requests may only go to this origin.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import Response

from respond.protocol.errors import APIError

__all__ = ["router"]

router = APIRouter()

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
ASSET_PREFIX = "/playground/assets"


@dataclass(frozen=True)
class Site:
    digest: str
    html: bytes
    assets: dict[str, bytes]

    @classmethod
    def load(cls) -> Site:
        folder = resources.files("respond.web")
        files = {
            entry.name: entry.read_bytes()
            for entry in folder.iterdir()
            if any(entry.name.endswith(ext) for ext in TYPES)
        }
        page = files.pop("index.html")
        hasher = hashlib.sha256()
        for name in sorted(files):
            hasher.update(name.encode() + b"\0" + files[name] + b"\0")
        digest = hasher.hexdigest()[:16]
        html = page.replace(b"{{assets}}", f"{ASSET_PREFIX}/{digest}".encode())
        return cls(digest, html, files)


@functools.cache
def site() -> Site:
    """The page and its assets, read from the package once (they never change at run time)."""
    return Site.load()


@router.get("/", include_in_schema=False)
@router.get("/playground", include_in_schema=False)
async def playground(request: Request) -> Response:
    page = site()
    etag = f'"{page.digest}"'
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache", "ETag": etag}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(page.html, media_type=TYPES[".html"], headers=headers)


@router.get(ASSET_PREFIX + "/{digest}/{name}", include_in_schema=False)
async def asset(digest: str, name: str) -> Response:
    page = site()
    body = page.assets.get(name)
    if body is None or digest != page.digest:
        raise APIError(404, f"No playground asset '{name}' here.", code="not_found")
    media = TYPES["." + name.rsplit(".", 1)[-1]]
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=31536000, immutable"}
    return Response(body, media_type=media, headers=headers)
