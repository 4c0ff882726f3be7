"""The web_search family: searches through the operator's search provider, and the pages
they find, opened by respond, inside the response.

A request's `{"type": "web_search"}` (or `web_search_preview`) tool becomes up to three
hosted tools the model sees as functions: `web_search(query)`, `open_page(url)` and
`find_in_page(url, pattern)` (the last two not with `external_web_access: false`). Their
calls become `web_search_call` items whose `action` is OpenAI's `search`, `open_page` or
`find_in_page`; the results join the context, numbered, for the next turn, and the answer's
mentions of the pages found are cited (`url_citation`). `search_context_size` sets how many
results and how much of a page the model reads; `filters.allowed_domains` keeps results and
pages to those domains; `user_location` goes to the provider where it takes one. Without a
provider (`--web-search`, or a `[web_search]` table) the tool is accepted and not run: the
model does not see it (logged once), as before respond ran it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from respond import _model_json as model_json
from respond._config import WebSearchSettings
from respond.protocol.errors import APIError
from respond.protocol.tools import WEB_SEARCH_TYPES, FunctionTool, WebSearchTool
from respond.responses.hosted._base import Hosted
from respond.responses.hosted._pages import Page, PageError, fetch
from respond.responses.hosted._search import Provider, Result, SearchError, in_domains, provider
from respond.responses.hosted._toolset import Request
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds.web_search_call import FIND, OPEN, SEARCH

__all__ = ["INCLUDE_SOURCES", "WebSearch", "WebSearchTools"]

log = logging.getLogger("respond.tools")

INCLUDE_SOURCES = "web_search_call.action.sources"
# search_context_size -> (results the model reads, characters of a page it reads).
CONTEXT_SIZES = {"low": (3, 2000), "medium": (5, 6000), "high": (8, 12000)}
SNIPPET_CHARS = 500
MAX_DOMAINS = 100
FOUND_MAX = 5  # find_in_page: the places shown
FOUND_AROUND = 200  # characters of the page either side of each

# Bounded: a small model may otherwise write one string until its token limit.
_URL = {"type": "string", "description": "The page's URL (http or https).", "maxLength": 2000}
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    SEARCH: (
        "Search the web. Returns numbered results (title, URL, snippet); answer from them "
        "and name the URLs you used.",
        {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to search for, in a few words.",
                    "minLength": 1,
                    "maxLength": 200,
                }
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    OPEN: (
        "Open a web page (such as a search result) and read its text.",
        {
            "type": "object",
            "properties": {"url": _URL},
            "required": ["url"],
            "additionalProperties": False,
        },
    ),
    FIND: (
        "Find a text in a web page: returns the places it occurs, with the text around them.",
        {
            "type": "object",
            "properties": {
                "url": _URL,
                "pattern": {
                    "type": "string",
                    "description": "The text to find.",
                    "minLength": 1,
                    "maxLength": 200,
                },
            },
            "required": ["url", "pattern"],
            "additionalProperties": False,
        },
    ),
}
_OFF = "this server runs no web search (start respond with --web-search and a provider)"
_OFF_LOGGED: list[bool] = []


@dataclass(frozen=True)
class WebSearch:
    """What the family runs with: the provider, and how pages are fetched."""

    provider: Provider
    timeout: float
    allow_private: bool

    @classmethod
    def of(cls, settings: WebSearchSettings) -> WebSearch:
        return cls(provider(settings), settings.timeout, settings.allow_private)


class WebSearchTools:
    """Makes the web_search tools of a request (when the server has a search provider)."""

    def __init__(self, search: WebSearch | None = None) -> None:
        self.search = search

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.search is not None:
            return tools
        return [tool for tool in tools if tool.get("type") not in WEB_SEARCH_TYPES]

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The request's web_search tools; `web_search` forced when `tool_choice` names the
        tool's type. Its fields are checked now, each error naming its field."""
        body = request.body
        found = [(i, t) for i, t in enumerate(body.tools) if isinstance(t, WebSearchTool)]
        choice = body.tool_choice
        kind = choice.get("type") if isinstance(choice, dict) else None
        forced = kind in WEB_SEARCH_TYPES
        if not found or self.search is None:
            if forced:
                why = "no such tool is given" if not found else _OFF
                raise APIError(
                    400,
                    f"tool_choice names {kind}, but {why}.",
                    param="tool_choice",
                    code="unsupported_tool_choice",
                )
            if found and not _OFF_LOGGED:
                _OFF_LOGGED.append(True)
                log.info("tool type 'web_search' is not run: %s", _OFF)
            return Hosted()
        if len(found) > 1:
            raise APIError(400, "Give at most one web_search tool.", param=f"tools[{found[1][0]}]")
        index, tool = found[0]
        where = f"tools[{index}]"
        names = set(TOOLS) if tool.external_web_access is not False else {SEARCH}
        for i, other in enumerate(body.tools):
            if isinstance(other, FunctionTool) and other.name in names:
                raise APIError(
                    400,
                    f"A function may not be named '{other.name}' beside the web_search tool "
                    "(the model sees web_search as that function).",
                    param=f"tools[{i}].name",
                )
        executor = _Executor(
            self.search, _options(tool, where), include=INCLUDE_SOURCES in body.include
        )
        tools = {
            name: HostedTool(
                visible=name,
                server_label="web_search",
                name=name,
                description=TOOLS[name][0],
                parameters=TOOLS[name][1],
                needs_approval=False,
                executor=executor,
                family="web_search",
            )
            for name in TOOLS
            if name in names
        }
        return Hosted(tools=tools, forced=(SEARCH,) if forced else None)


@dataclass(frozen=True)
class _Options:
    results: int
    page_chars: int
    domains: tuple[str, ...]
    location: dict[str, str] = field(default_factory=dict)


def _options(tool: WebSearchTool, where: str) -> _Options:
    size = tool.search_context_size or "medium"
    if size not in CONTEXT_SIZES:
        raise APIError(
            400,
            "'search_context_size' must be low, medium or high.",
            param=f"{where}.search_context_size",
        )
    results, page_chars = CONTEXT_SIZES[size]
    return _Options(results, page_chars, _domains(tool, where), _location(tool, where))


def _domains(tool: WebSearchTool, where: str) -> tuple[str, ...]:
    filters = tool.filters
    if filters is None:
        return ()
    if not isinstance(filters, dict):
        raise APIError(400, "'filters' must be an object.", param=f"{where}.filters")
    domains = filters.get("allowed_domains")
    if domains is None:
        return ()
    param = f"{where}.filters.allowed_domains"
    if (
        not isinstance(domains, list)
        or len(domains) > MAX_DOMAINS
        or not all(isinstance(d, str) and d.strip() for d in domains)
    ):
        raise APIError(
            400, f"'allowed_domains' must list up to {MAX_DOMAINS} domains.", param=param
        )
    # "https://docs.example.com/x" is taken as the domain docs.example.com.
    return tuple(d.strip().lower().split("://")[-1].split("/")[0].rstrip(".") for d in domains)


def _location(tool: WebSearchTool, where: str) -> dict[str, str]:
    location = tool.user_location
    if location is None:
        return {}
    param = f"{where}.user_location"
    if not isinstance(location, dict) or location.get("type", "approximate") != "approximate":
        raise APIError(
            400,
            '\'user_location\' must be {"type": "approximate", "country", "region", "city", '
            '"timezone"}.',
            param=param,
        )
    fields = ("country", "region", "city", "timezone")
    return {key: value for key in fields if isinstance(value := location.get(key), str) and value}


class _Executor:
    """Runs one request's web_search calls; the pages it opened are kept for find_in_page."""

    def __init__(self, search: WebSearch, options: _Options, *, include: bool) -> None:
        self.search = search
        self.options = options
        self.include = include  # the items keep their search's sources
        self.pages: dict[str, Page] = {}

    async def call(self, name: str, arguments: str) -> CallResult:
        try:
            args = model_json.loads(arguments)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            return _failed("invalid_arguments", f"{name} needs its arguments as a JSON object.")
        if name == SEARCH:
            return await self._search(args.get("query"))
        url = args.get("url")
        if not isinstance(url, str) or not url:
            return _failed("invalid_arguments", f"{name} needs 'url'.")
        if name == OPEN:
            return await self._open(url)
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return _failed("invalid_arguments", "find_in_page needs 'pattern'.")
        return await self._find(url, pattern)

    async def _search(self, query: Any) -> CallResult:
        if not isinstance(query, str) or not query.strip():
            return _failed("invalid_arguments", "web_search needs 'query'.")
        options = self.options
        try:
            results = await self.search.provider.search(
                query,
                count=options.results,
                domains=options.domains,
                location=options.location,
            )
        except SearchError as exc:
            return _failed("search_failed", str(exc))
        sources = [{"type": "url", "url": r.url} for r in results]
        return CallResult(
            output=results_text(query, [_shown(r) for r in results]),
            results=sources if self.include else None,
            found=tuple((r.url, r.title) for r in results),
        )

    async def _page(self, url: str) -> Page:
        if not in_domains(url, self.options.domains):
            raise PageError(
                f"{url[:200]} is not on the allowed domains: {', '.join(self.options.domains)}"
            )
        page = self.pages.get(url)
        if page is None:
            page = await fetch(
                url, timeout=self.search.timeout, allow_private=self.search.allow_private
            )
            self.pages[url] = page
        return page

    async def _open(self, url: str) -> CallResult:
        try:
            page = await self._page(url)
        except PageError as exc:
            return _failed("page_unavailable", str(exc))
        text = page.text[: self.options.page_chars]
        if len(page.text) > len(text):
            text += f"\n[The page goes on: {len(page.text) - len(text)} more characters.]"
        output = f"{page.title}\nURL: {page.url}\n\n{text or '(The page has no text.)'}"
        return CallResult(output=output, found=((url, page.title),))

    async def _find(self, url: str, pattern: str) -> CallResult:
        try:
            page = await self._page(url)
        except PageError as exc:
            return _failed("page_unavailable", str(exc))
        places = _places(page.text, pattern)
        if not places:
            output = f"'{pattern}' does not occur on {page.url}."
        else:
            shown = "\n\n".join(f"[{n}] ...{p}..." for n, p in enumerate(places, start=1))
            output = f"'{pattern}' on {page.url}:\n\n{shown}"
        return CallResult(output=output, found=((url, page.title),))


def results_text(query: str, results: list[Result]) -> str:
    """A search's results as the model reads them: numbered, each with its title and URL."""
    if not results:
        return f"No web results for {query!r}."
    return f"Web results for {query!r}:\n\n" + "\n\n".join(
        f"[{n}] {r.title}\nURL: {r.url}\n{r.snippet}".rstrip()
        for n, r in enumerate(results, start=1)
    )


def _shown(result: Result) -> Result:
    snippet = result.snippet
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[:SNIPPET_CHARS].rstrip() + "..."
    return Result(url=result.url, title=result.title, snippet=snippet)


def _places(text: str, pattern: str) -> list[str]:
    """Where `pattern` occurs in `text` (case aside), each with the text around it."""
    lowered, wanted = text.lower(), pattern.lower()
    places: list[str] = []
    start = lowered.find(wanted)
    while start >= 0 and len(places) < FOUND_MAX:
        around = text[max(start - FOUND_AROUND, 0) : start + len(wanted) + FOUND_AROUND]
        places.append(" ".join(around.split()))
        start = lowered.find(wanted, start + len(wanted) + FOUND_AROUND)
    return places


def _failed(kind: str, message: str) -> CallResult:
    return CallResult(error={"type": kind, "message": message})
