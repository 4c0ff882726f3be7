"""Input images as the engine gets them: by data URL, whatever the request gave.

- An image by `file_id` (an `input_image`, a computer-use screenshot) is read from the file
  store, the tenant's own, for every engine: an upstream cannot read respond's files.
- An image by http(s) URL is fetched by respond for an engine that reads image bytes itself
  (the embedded one, `ModelInfo.image_bytes`), and only from hosts the image allow-list
  admits (`--image-allow`, the same patterns as MCP egress: responses/hosted/egress.py).
  Loopback and private addresses (10/8, 172.16/12, 192.168/16, link-local, fc00::/7) are
  refused even then, unless `--image-allow-private`: as an address in the URL, and as what
  its name resolves to. Every URL of the request is checked before any is fetched: a refused
  one is a 400 naming the part, and nothing was fetched. An upstream engine is given the URL
  as sent.
- A data URL is given as it is.

The stored input keeps what the client sent (the URL, the file id), not the bytes.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import mimetypes
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from respond.protocol.errors import APIError
from respond.protocol.requests import (
    ComputerCallOutputInput,
    InputImage,
    InputItem,
    InputMessage,
)
from respond.responses.hosted.egress import Egress
from respond.store.base import JSON

__all__ = ["FileReader", "ImagePolicy", "ImageSources"]


class FileReader(Protocol):
    async def file_content(self, tenant: str | None, file_id: str) -> tuple[JSON, bytes] | None:
        """The file's object and bytes, None when the tenant has no such file."""
        ...


@dataclass(frozen=True)
class ImagePolicy:
    """Where images by URL may be fetched from, and how much of one."""

    allow: tuple[str, ...] = ()  # host wildcards or URL prefixes (--image-allow)
    allow_private: bool = False  # loopback and private addresses too (--image-allow-private)
    max_bytes: int = 20 * 1024 * 1024
    timeout: float = 30.0  # seconds for one fetch


@dataclass(frozen=True)
class _Found:
    """An image of the context: where it is, and the URL or file id it is given by."""

    index: int  # the item's, in the context
    part: int | None  # the content part's, for a message; None for a screenshot
    url: str | None
    file_id: str | None
    where: str  # the part, as a 400 names it


class ImageSources:
    def __init__(
        self,
        files: FileReader | None,
        policy: ImagePolicy | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.files = files
        self.policy = policy or ImagePolicy()
        self._egress = Egress(self.policy.allow)
        self._transport = transport  # tests: a fake network

    async def resolve(
        self,
        items: Sequence[InputItem],
        *,
        tenant: str | None,
        fetch_urls: bool,
        new_from: int = 0,
        param: str = "input",
    ) -> list[InputItem]:
        """`items` with each image by file id, and (`fetch_urls`) by http(s) URL, given by
        data URL instead. Items from `new_from` on are the request's input, named in errors
        as `param[i]`; those before it are stored history, named as `param`."""
        found = [
            f
            for f in _images(items, new_from, param)
            if (f.url is None and f.file_id is not None) or (fetch_urls and _remote(f.url))
        ]
        for image in found:
            if image.url:
                self._check(image.url, f"{image.where}.image_url")
        out = list(items)
        for image in found:
            data = await (self._fetch(image) if image.url else self._read(image, tenant))
            out[image.index] = _with_url(out[image.index], image.part, data)
        return out

    def _check(self, url: str, param: str) -> None:
        """A 400 saying how to allow `url`, unless the allow-list admits it (and, for a
        loopback or private address, --image-allow-private is on)."""
        host = (urlsplit(url).hostname or "").lower()
        private = _private(host) and not self.policy.allow_private
        if self._egress.matches(url) and not private:
            return
        how = (
            "`respond serve --image-allow-private` (loopback and private addresses are off "
            "by default)"
            if private
            else f"`respond serve --image-allow '{host}'` (repeatable; a wildcard pattern over "
            "the host, or a URL prefix)"
        )
        raise APIError(
            400,
            f"respond may not fetch the image at {url}: its host is not on this server's image "
            f"allow-list. Send the image as a data URL or a file_id, or the operator can allow "
            f"it with {how}.",
            param=param,
            code="image_url_not_allowed",
        )

    async def _read(self, image: _Found, tenant: str | None) -> str:
        assert image.file_id is not None
        found = await self.files.file_content(tenant, image.file_id) if self.files else None
        if found is None:
            raise APIError(
                404,
                f"No file found with id '{image.file_id}'.",
                param=f"{image.where}.file_id",
                code="file_not_found",
            )
        meta, content = found
        kind = mimetypes.guess_type(str(meta.get("filename", "")))[0] or "image/png"
        return _data_url(kind, content)

    async def _fetch(self, image: _Found) -> str:
        assert image.url is not None
        param = f"{image.where}.image_url"
        host = (urlsplit(image.url).hostname or "").lower()
        if not self.policy.allow_private and await _resolves_private(host):
            raise APIError(
                400,
                f"respond may not fetch the image at {image.url}: {host} resolves to a "
                "loopback or private address (`respond serve --image-allow-private` allows it).",
                param=param,
                code="image_url_not_allowed",
            )
        try:
            async with (
                httpx.AsyncClient(timeout=self.policy.timeout, transport=self._transport) as client,
                client.stream("GET", image.url) as reply,
            ):
                if reply.status_code != 200:
                    raise _unfetched(image.url, f"it answered HTTP {reply.status_code}", param)
                content = bytearray()
                async for piece in reply.aiter_bytes():
                    content += piece
                    if len(content) > self.policy.max_bytes:
                        limit = self.policy.max_bytes // (1024 * 1024)
                        raise _unfetched(image.url, f"it is larger than {limit} MiB", param)
                kind = reply.headers.get("content-type", "image/png").split(";")[0]
        except httpx.HTTPError as exc:
            raise _unfetched(image.url, str(exc) or type(exc).__name__, param) from exc
        return _data_url(kind, bytes(content))


def _images(items: Sequence[InputItem], new_from: int, param: str) -> list[_Found]:
    found: list[_Found] = []
    for index, item in enumerate(items):
        where = f"{param}[{index - new_from}]" if index >= new_from else param
        if isinstance(item, InputMessage) and not isinstance(item.content, str):
            for part, content in enumerate(item.content):
                if isinstance(content, InputImage):
                    at = f"{where}.content[{part}]"
                    found.append(_Found(index, part, content.image_url, content.file_id, at))
        elif isinstance(item, ComputerCallOutputInput):
            shot = item.output
            found.append(_Found(index, None, shot.image_url, shot.file_id, f"{where}.output"))
    return [f for f in found if f.url or f.file_id]


def _remote(url: str | None) -> bool:
    return url is not None and url.split(":", 1)[0].lower() in ("http", "https")


def _with_url(item: InputItem, part: int | None, url: str) -> InputItem:
    if isinstance(item, ComputerCallOutputInput):
        shot = item.output.model_copy(update={"image_url": url, "file_id": None})
        return item.model_copy(update={"output": shot})
    assert isinstance(item, InputMessage) and not isinstance(item.content, str)
    assert part is not None
    content = list(item.content)
    content[part] = content[part].model_copy(update={"image_url": url, "file_id": None})
    return item.model_copy(update={"content": content})


def _data_url(kind: str, content: bytes) -> str:
    return f"data:{kind};base64,{base64.b64encode(content).decode()}"


def _private(host: str) -> bool:
    """An address (not a name) of loopback, a private network, link-local or unspecified."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")
    return _private_address(address)


def _private_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_unspecified
        or address.is_reserved
    )


async def _resolves_private(host: str) -> bool:
    """Whether the name resolves to an address _private refuses (a name that does not
    resolve is left to the fetch to fail)."""
    if _private(host):
        return True
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return any(_private_address(ipaddress.ip_address(info[4][0])) for info in infos)


def _unfetched(url: str, why: str, param: str) -> APIError:
    return APIError(
        400,
        f"The image at {url} could not be fetched: {why}.",
        param=param,
        code="image_url_unreachable",
    )
