"""The web_search family through `Responses` and the hosted loop: the real SearXNG client
against a FAKE SearXNG (the web's search engines cannot be reached here), pages from a
real local HTTP server, and the FAKE ScriptedEngine making the calls on demand (a real
model's calls are not scriptable; tests/e2e/test_web_search.py runs the real one)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from respond._config import Settings, WebSearchSettings
from respond._config_file import ConfigError, read_config, web_search_settings
from respond.engines import _base as d
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.responses.context import items_to_messages
from respond.responses.fold import fold_events
from respond.responses.hosted import WebSearch, families
from respond.responses.hosted._pages import PageError, _target, fetch
from respond.responses.hosted._search import provider
from respond.responses.run import PreparedRun, Responses
from respond.testing import ScriptedEngine
from tests.support.fake_searxng import FakeSearxng, PageServer

END: list[d.Delta] = [d.Usage(input_tokens=5, output_tokens=3), d.Finish("stop")]
PARIS = "https://blog.example.net/capital-of-france"


def call(name: str, arguments: dict[str, Any]) -> list[d.Delta]:
    return [
        d.ToolCallStart(call_id="call_1", name=name),
        d.ToolCallArgumentsDelta(json.dumps(arguments)),
        d.ToolCallEnd(),
        *END,
    ]


def answer(text: str) -> list[d.Delta]:
    return [d.TextDelta(text), *END]


async def respond(
    scripts: list[list[d.Delta]],
    body: dict[str, Any],
    searxng: FakeSearxng | None,
    *,
    allow_private: bool = False,
) -> tuple[PreparedRun, ScriptedEngine, list[Any]]:
    engine = ScriptedEngine(scripts)
    search = None
    if searxng is not None:
        settings = WebSearchSettings("searxng", url=searxng.url, allow_private=allow_private)
        search = WebSearch.of(settings)
    service = Responses({engine.info.id: engine}, hosted=families(search=search))
    request = CreateResponseBody.model_validate({"model": engine.info.id, **body})
    run = await service.prepare(request, tenant=None)
    events = [event async for event in service.events(run)]
    return run, engine, events


async def test_a_forced_search_is_a_web_search_call_the_answer_cites(
    searxng: FakeSearxng,
) -> None:
    said = f"Paris, says [the blog]({PARIS})."
    body = {
        "input": "What is the capital of France?",
        "tools": [{"type": "web_search"}],
        "tool_choice": {"type": "web_search"},
        "include": ["web_search_call.action.sources"],
    }
    run, engine, events = await respond(
        [call("web_search", {"query": "capital of France"}), answer(said)], body, searxng
    )
    response = run.builder.response
    assert response.status == "completed"
    searched, message = response.output
    assert searched.type == "web_search_call" and searched.status == "completed"
    assert searched.action == {
        "type": "search",
        "query": "capital of France",
        "sources": [{"type": "url", "url": r["url"]} for r in searxng.answer("capital of France")],
    }
    assert searxng.queries[-1] == "capital of France"
    first = engine.turns[0]
    assert first.tool_choice.mode == "required" and first.tool_choice.allowed == ("web_search",)
    assert {s.name for s in first.tools} == {"web_search", "open_page", "find_in_page"}
    told = engine.turns[1].messages[-1]
    assert told.role == "tool" and f"[1] The capital of France\nURL: {PARIS}" in str(told.content)
    (note,) = message.content[0].annotations  # type: ignore[union-attr]
    assert note == {
        "type": "url_citation",
        "url": PARIS,
        "title": "The capital of France",
        "start_index": said.index("[the blog]"),
        "end_index": len(said) - 1,
    }
    # The citation streams as OpenAI's annotation.added, before the text is done; the
    # final response's annotation is the one the event carried.
    (added,) = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert added.model_dump() == {
        "type": "response.output_text.annotation.added",
        "sequence_number": added.sequence_number,
        "item_id": message.id,
        "output_index": 1,
        "content_index": 0,
        "annotation_index": 0,
        "annotation": note,
    }
    types = [e.type for e in events if getattr(e, "item_id", None) == message.id]
    assert types[-3:] == [
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
    ]
    assert fold_events(events) == response
    kinds = [e.type for e in events if "web_search_call" in e.type]
    assert kinds == [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    assert [t["type"] for t in response.tools] == ["web_search"]


async def test_sources_only_when_included_and_only_from_allowed_domains(
    searxng: FakeSearxng,
) -> None:
    tool = {"type": "web_search_preview", "filters": {"allowed_domains": ["https://example.org"]}}
    body = {"input": "Search.", "tools": [tool], "tool_choice": {"type": "web_search_preview"}}
    run, engine, _ = await respond(
        [call("web_search", {"query": "respond web search"}), answer("Done.")], body, searxng
    )
    searched = run.builder.response.output[0]
    assert searched.action == {"type": "search", "query": "respond web search"}  # type: ignore[union-attr]
    told = str(engine.turns[1].messages[-1].content)
    assert "docs.example.org" in told and "example.com" not in told and "example.net" not in told


async def test_a_provider_that_is_down_fails_the_call_not_the_response(
    searxng: FakeSearxng,
) -> None:
    body = {"input": "Search.", "tools": [{"type": "web_search"}], "tool_choice": "required"}
    searxng.down = True
    try:
        run, engine, _ = await respond(
            [call("web_search", {"query": "llamas"}), answer("It is down.")], body, searxng
        )
    finally:
        searxng.down = False
    response = run.builder.response
    assert response.status == "completed"
    assert [(i.type, i.status) for i in response.output] == [  # type: ignore[union-attr]
        ("web_search_call", "failed"),
        ("message", "completed"),
    ]
    told = str(engine.turns[1].messages[-1].content)
    assert told == "Error: the search provider (searxng) answered HTTP 503"


async def test_a_page_on_loopback_is_refused_unless_allowed(
    searxng: FakeSearxng, pages: PageServer
) -> None:
    url = f"{pages.url}/museum.html"
    body = {"input": "Open it.", "tools": [{"type": "web_search"}]}
    run, engine, _ = await respond([call("open_page", {"url": url}), answer("No.")], body, searxng)
    opened = run.builder.response.output[0]
    assert opened.status == "failed"  # type: ignore[union-attr]
    assert opened.action == {"type": "open_page", "url": url}  # type: ignore[union-attr]
    told = str(engine.turns[1].messages[-1].content)
    assert "not public" in told and "--web-search-allow-private" in told
    assert pages.paths == [], "respond fetched a page it refused"

    scripts = [call("open_page", {"url": url}), answer("9 to 5.")]
    run, engine, _ = await respond(scripts, body, searxng, allow_private=True)
    assert run.builder.response.output[0].status == "completed"  # type: ignore[union-attr]
    told = str(engine.turns[1].messages[-1].content)
    assert told.startswith(f"Opening hours\nURL: {url}\n\nThe museum\nOpen from 9:00")
    assert "hidden" not in told and "p {}" not in told


async def test_find_in_page_shows_where_the_pattern_occurs(
    searxng: FakeSearxng, pages: PageServer
) -> None:
    url = f"{pages.url}/museum.html"
    body = {"input": "Find it.", "tools": [{"type": "web_search"}]}
    scripts = [call("find_in_page", {"url": url, "pattern": "monday"}), answer("Closed Mondays.")]
    run, engine, _ = await respond(scripts, body, searxng, allow_private=True)
    found = run.builder.response.output[0]
    assert found.action == {"type": "find_in_page", "url": url, "pattern": "monday"}  # type: ignore[union-attr]
    told = str(engine.turns[1].messages[-1].content)
    assert told.startswith(f"'monday' on {url}:\n\n[1] ...") and "but Monday." in told


async def test_without_a_provider_the_tool_is_left_out(searxng: FakeSearxng) -> None:
    body = {"input": "hi", "tools": [{"type": "web_search"}]}
    run, engine, _ = await respond([answer("Hi.")], body, None)
    assert engine.turns[0].tools == [] and run.builder.response.tools == []
    with pytest.raises(APIError) as refused:
        await respond([], {**body, "tool_choice": {"type": "web_search"}}, None)
    assert refused.value.param == "tool_choice" and "--web-search" in refused.value.message


async def test_allowed_tools_naming_web_search_keeps_its_tools_and_leaves_out_others(
    searxng: FakeSearxng,
) -> None:
    lookup = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    body = {
        "input": "What is the capital of France?",
        "tools": [lookup, {"type": "web_search"}],
        "tool_choice": {
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "web_search"}],
        },
    }
    run, engine, _ = await respond(
        [call("web_search", {"query": "capital of France"}), answer("Paris.")], body, searxng
    )
    assert [item.type for item in run.builder.response.output] == ["web_search_call", "message"]
    first, second = engine.turns
    assert first.tool_choice.mode == "required"
    assert first.tool_choice.allowed == ("web_search", "open_page", "find_in_page")
    # Once it has searched, the choice is the model's, still among the allowed.
    assert second.tool_choice == d.ToolChoice(mode="auto", allowed=first.tool_choice.allowed)
    assert run.builder.response.tool_choice == body["tool_choice"]
    # A hosted type the request has no tool of is a 400 naming the entry.
    body["tool_choice"] = {
        "type": "allowed_tools",
        "tools": [{"type": "web_search"}, {"type": "file_search"}],
    }
    with pytest.raises(APIError) as refused:
        await respond([answer("x")], body, searxng)
    assert refused.value.status == 400 and refused.value.param == "tool_choice.tools[1]"


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"search_context_size": "huge"}, "tools[0].search_context_size"),
        ({"filters": {"allowed_domains": "example.com"}}, "tools[0].filters.allowed_domains"),
        ({"user_location": {"type": "exact"}}, "tools[0].user_location"),
    ],
)
async def test_a_malformed_tool_is_a_400_naming_its_field(
    searxng: FakeSearxng, tool: dict[str, Any], param: str
) -> None:
    with pytest.raises(APIError) as refused:
        await respond([], {"input": "hi", "tools": [{"type": "web_search", **tool}]}, searxng)
    assert refused.value.status == 400 and refused.value.param == param


async def test_external_web_access_off_offers_only_the_search(searxng: FakeSearxng) -> None:
    tool = {"type": "web_search", "external_web_access": False}
    _, engine, _ = await respond([answer("Hi.")], {"input": "hi", "tools": [tool]}, searxng)
    assert [s.name for s in engine.turns[0].tools] == ["web_search"]


def test_flags_beat_the_web_search_table(tmp_path: Path) -> None:
    path = tmp_path / "respond.toml"
    path.write_text('[web_search]\nprovider = "searxng"\nurl = "http://search:8888"\ntimeout = 5\n')
    config = read_config(path)
    assert web_search_settings(config, Settings()) == WebSearchSettings(
        "searxng", url="http://search:8888", timeout=5.0
    )
    given = Settings(web_search="brave", web_search_key="k", web_search_allow_private=True)
    assert web_search_settings(config, given) == WebSearchSettings(
        "brave", url="http://search:8888", api_key="k", timeout=5.0, allow_private=True
    )
    assert web_search_settings(None, Settings()) is None
    with pytest.raises(ConfigError, match="--web-search-url"):
        web_search_settings(None, Settings(web_search="searxng"))
    with pytest.raises(ConfigError, match="--web-search-key"):
        web_search_settings(None, Settings(web_search="tavily"))


class _Recorder(BaseHTTPRequestHandler):
    """A FAKE Brave / Tavily API (neither can be reached here): it keeps each request and
    answers one result in the provider's shape."""

    seen: ClassVar[list[tuple[str, str, dict[str, str], bytes]]] = []

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self._answer({"web": {"results": [{"url": PARIS, "title": "T", "description": "D"}]}})

    def do_POST(self) -> None:
        self._answer({"results": [{"url": PARIS, "title": "T", "content": "C"}]})

    def _answer(self, body: object) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


async def test_brave_and_tavily_are_asked_as_their_apis_say() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api"
    location = {"country": "FR", "city": "Paris"}
    try:
        brave = provider(WebSearchSettings("brave", url=url, api_key="bk"))
        found = await brave.search("q", count=2, domains=(), location=location)
        tavily = provider(WebSearchSettings("tavily", url=url, api_key="tk"))
        also = await tavily.search("q", count=2, domains=("example.net",), location=location)
    finally:
        server.shutdown()
        server.server_close()
    assert [r.snippet for r in found] == ["D"] and [r.snippet for r in also] == ["C"]
    (get, path, headers, _), (post, _, posted, body) = _Recorder.seen
    assert get == "GET" and path == "/api?q=q&count=8&country=FR"
    assert headers["X-Subscription-Token"] == "bk" and headers["X-Loc-City"] == "Paris"
    assert post == "POST" and posted["Authorization"] == "Bearer tk"
    assert json.loads(body) == {"query": "q", "max_results": 2, "include_domains": ["example.net"]}


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data", "not public"),  # cloud metadata
        ("http://10.1.2.3/", "not public"),
        ("http://[::ffff:127.0.0.1]:8080/", "not public"),
        ("http://0.0.0.0:8080/", "not public"),
        ("http://localhost./admin", "not public"),
        ("file:///etc/passwd", r"only http\(s\)"),
        ("http://127.0.0.1:99999/", "not a URL"),
    ],
)
async def test_pages_off_the_public_web_are_refused_before_any_connection(
    url: str, why: str
) -> None:
    with pytest.raises(PageError, match=why):
        await fetch(url, timeout=5, allow_private=False)


async def test_a_public_host_is_connected_to_at_the_address_judged() -> None:
    target = await _target("https://user@8.8.8.8:8443/a?b=c", allow_private=False)
    assert target.url == "https://8.8.8.8:8443/a?b=c"
    assert target.headers == {"Host": "8.8.8.8:8443"}
    assert target.extensions == {"sni_hostname": "8.8.8.8"}
    v6 = await _target("http://[2001:4860:4860::8888]/", allow_private=False)
    assert v6.url == "http://[2001:4860:4860::8888]:80/"
    assert v6.headers == {"Host": "[2001:4860:4860::8888]"}


def test_a_web_search_call_replays_as_the_call_and_its_kept_sources() -> None:
    body = CreateResponseBody.model_validate(
        {
            "input": [
                {"type": "message", "role": "user", "content": "Capital of France?"},
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {
                        "type": "search",
                        "query": "capital of France",
                        "sources": [{"type": "url", "url": PARIS}],
                    },
                },
                {
                    "type": "web_search_call",
                    "id": "ws_2",
                    "status": "completed",
                    "action": {"type": "open_page", "url": PARIS},
                },
            ]
        }
    )
    assert isinstance(body.input, list)
    _, searched, told, opened, read = items_to_messages(body.input, vision=False)
    (call,) = searched.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("web_search", {"query": "capital of France"})
    assert told.content == f"Results found (their text was not kept):\n{PARIS}"
    (page,) = opened.tool_calls
    assert (page.name, json.loads(page.arguments)) == ("open_page", {"url": PARIS})
    assert read.content == "(What this call read was not kept.)"
