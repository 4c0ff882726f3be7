"""The search providers web_search runs its searches through: a SearXNG instance's JSON
API (`/search?q=...&format=json`), Brave Search's web search API, or Tavily's search API.

Each answers a query with results (URL, title, snippet), at most `count`, from the
`domains` given when there are any (a provider that cannot be asked so is filtered here
too), near the user's `location` where the provider takes one. A provider that cannot be
reached, or answers badly, is a `SearchError`: the call fails, not the response.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from respond._config import WebSearchSettings

__all__ = ["Location", "Provider", "Result", "SearchError", "in_domains", "provider"]

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"
# Asked for more than kept: results from outside allowed_domains are dropped afterwards.
OVERFETCH = 4


class SearchError(Exception):
    """The provider could not answer (down, refused, or answered what is not results)."""


@dataclass(frozen=True)
class Result:
    url: str
    title: str
    snippet: str


# OpenAI's approximate user_location: country (ISO 3166 two letters), region, city, timezone.
Location = Mapping[str, str]


class Provider(Protocol):
    name: str

    async def search(
        self, query: str, *, count: int, domains: Sequence[str], location: Location
    ) -> list[Result]: ...


def in_domains(url: str, domains: Sequence[str]) -> bool:
    """Whether `url`'s host is one of `domains` or below one (any host when none are given)."""
    if not domains:
        return True
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == domain or host.endswith("." + domain) for domain in domains)


class _Http:
    """What every provider shares: one GET or POST, its JSON, its failures said once."""

    name = ""

    def __init__(self, settings: WebSearchSettings, url: str) -> None:
        self.url = url
        self.key = settings.api_key
        self.timeout = settings.timeout

    async def _json(self, method: str, **request: Any) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                reply = await client.request(method, self.url, **request)
        except httpx.HTTPError as exc:
            raise SearchError(f"the search provider ({self.name}) did not answer: {exc}") from exc
        if reply.status_code != 200:
            raise SearchError(
                f"the search provider ({self.name}) answered HTTP {reply.status_code}"
            )
        try:
            body = reply.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SearchError(f"the search provider ({self.name}) answered no JSON object")
        return body

    def _kept(self, rows: Any, snippet: str, count: int, domains: Sequence[str]) -> list[Result]:
        results = []
        for row in rows if isinstance(rows, list) else []:
            url = row.get("url") if isinstance(row, dict) else None
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                continue
            if not in_domains(url, domains):
                continue
            results.append(
                Result(
                    url=url, title=str(row.get("title") or url), snippet=str(row.get(snippet) or "")
                )
            )
        return results[:count]


class SearXNG(_Http):
    name = "searxng"

    def __init__(self, settings: WebSearchSettings) -> None:
        super().__init__(settings, f"{(settings.url or '').rstrip('/')}/search")

    async def search(
        self, query: str, *, count: int, domains: Sequence[str], location: Location
    ) -> list[Result]:
        # SearXNG takes no location and no domain list: its results are filtered here.
        body = await self._json("GET", params={"q": query, "format": "json"})
        return self._kept(body.get("results"), "content", count, domains)


class Brave(_Http):
    name = "brave"

    def __init__(self, settings: WebSearchSettings) -> None:
        super().__init__(settings, settings.url or BRAVE_URL)

    async def search(
        self, query: str, *, count: int, domains: Sequence[str], location: Location
    ) -> list[Result]:
        params: dict[str, Any] = {"q": query, "count": min(count * OVERFETCH, 20)}
        headers = {"Accept": "application/json", "X-Subscription-Token": self.key or ""}
        if "country" in location:
            params["country"] = location["country"]
        # Brave's location headers, for results near the user.
        for field, header in _BRAVE_LOCATION.items():
            if field in location:
                headers[header] = location[field]
        body = await self._json("GET", params=params, headers=headers)
        web = body.get("web")
        return self._kept(
            web.get("results") if isinstance(web, dict) else None, "description", count, domains
        )


_BRAVE_LOCATION = {"city": "X-Loc-City", "region": "X-Loc-State-Name", "timezone": "X-Loc-Timezone"}


class Tavily(_Http):
    name = "tavily"

    def __init__(self, settings: WebSearchSettings) -> None:
        super().__init__(settings, settings.url or TAVILY_URL)

    async def search(
        self, query: str, *, count: int, domains: Sequence[str], location: Location
    ) -> list[Result]:
        request: dict[str, Any] = {"query": query, "max_results": min(count, 20)}
        if domains:
            request["include_domains"] = list(domains)
        headers = {"Authorization": f"Bearer {self.key or ''}"}
        body = await self._json("POST", json=request, headers=headers)
        return self._kept(body.get("results"), "content", count, domains)


def provider(settings: WebSearchSettings) -> Provider:
    kinds: dict[str, type[SearXNG | Brave | Tavily]] = {
        "searxng": SearXNG,
        "brave": Brave,
        "tavily": Tavily,
    }
    return kinds[settings.provider](settings)
