"""A FAKE SearXNG instance, and a real local web server for the pages it finds.

The web and its search engines cannot be reached from the test machine, so this small HTTP
server answers SearXNG's JSON API (`GET /search?q=...&format=json`) from a fixed corpus:
every entry, those sharing the most words with the query first, as SearXNG's
`{"query", "results": [{"url", "title", "content", "engine"}]}`. `down` answers 503, as
an instance having an outage. Every query is kept in `queries`.

`PageServer` is a plain http.server over a folder: the pages open_page fetches. It listens
on loopback, so respond fetches from it only when started with --web-search-allow-private.

The fixtures `searxng` (the FAKE SearXNG) and `pages` (a PageServer of `PAGES`), one each a
test module, are every web_search test's (tests/conftest.py registers this module as a
plugin); `flags` are respond's command-line flags that point it at the fake.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest


@dataclass(frozen=True)
class Entry:
    url: str
    title: str
    content: str


CORPUS = (
    Entry(
        "https://docs.example.org/respond/web-search",
        "Web search in respond",
        "respond runs the web_search tool through a search provider such as SearXNG.",
    ),
    Entry(
        "https://news.example.com/2026/llamas",
        "Llamas of the Andes",
        "Llamas live in the Andes mountains and carry loads for farmers.",
    ),
    Entry(
        "https://blog.example.net/capital-of-france",
        "The capital of France",
        "Paris is the capital and largest city of France.",
    ),
)


# The pages `pages` serves: a page to read, and one that must never be fetched.
PAGES = {
    "museum.html": """<html><head><title>Opening hours</title><style>p {}</style></head>
<body><h1>The museum</h1><p>Open from 9:00 to 17:00, every day but Monday.</p>
<script>var x = "hidden";</script><p>Tickets at the door.</p></body></html>""",
    "secret.html": "<title>Internal</title><p>Not for the web.</p>",
}


@pytest.fixture(scope="module")
def searxng() -> Iterator[FakeSearxng]:
    """A FAKE SearXNG, running for the test module."""
    fake = FakeSearxng().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageServer]:
    """A real local web server of `PAGES`, running for the test module."""
    root = tmp_path_factory.mktemp("pages")
    for name, page in PAGES.items():
        (root / name).write_text(page)
    server = PageServer(root).start()
    yield server
    server.stop()


def flags(fake: FakeSearxng) -> tuple[str, ...]:
    """respond's flags for searching through `fake`."""
    return ("--web-search", "searxng", "--web-search-url", fake.url)


@dataclass
class FakeSearxng:
    corpus: Sequence[Entry] = CORPUS
    down: bool = False
    queries: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeSearxng:
        fake = self

        class Handler(_Handler):
            searxng = fake

        self._server = _serve(Handler)
        return self

    def stop(self) -> None:
        _stop(self._server)

    def answer(self, query: str) -> list[dict[str, str]]:
        words = set(query.lower().split())

        def shared(entry: Entry) -> int:
            return len(words & set(f"{entry.title} {entry.content}".lower().split()))

        ranked = sorted(self.corpus, key=shared, reverse=True)
        return [
            {"url": e.url, "title": e.title, "content": e.content, "engine": "fake"} for e in ranked
        ]


class _Handler(BaseHTTPRequestHandler):
    searxng: FakeSearxng

    def log_message(self, format: str, *args: object) -> None:
        return  # the tests read `queries`

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        if self.searxng.down:
            self._send(503, {"error": "Service Unavailable"})
            return
        if parts.path != "/search" or params.get("format") != ["json"]:
            self._send(404, {"error": "not found"})
            return
        query = params.get("q", [""])[0]
        self.searxng.queries.append(query)
        results = self.searxng.answer(query)
        self._send(200, {"query": query, "number_of_results": len(results), "results": results})

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@dataclass
class PageServer:
    """A real HTTP server for the files of `root`; the paths it was asked for in `paths`."""

    root: Path
    paths: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the page server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> PageServer:
        pages = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                pages.paths.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = _serve(partial(Handler, directory=str(self.root)))
        return self

    def stop(self) -> None:
        _stop(self._server)


def _serve(handler: object) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # type: ignore[arg-type]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _stop(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()
