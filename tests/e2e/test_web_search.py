"""The web_search tool inside responses, on the real server and bundled model.

respond is started with `--web-search searxng` pointed at a FAKE SearXNG (the web's search
engines cannot be reached here; tests/support/fake_searxng.py answers SearXNG's JSON API
from a fixed corpus), and its pages are served by a real local HTTP server on loopback,
which respond refuses to fetch (no --web-search-allow-private). The search is forced, so
even the tiny model makes one. Every body and event is checked (the SDK's types for
OpenAI's web_search shapes, the Open Responses schema for the rest). A second respond,
without a provider, leaves the tool out and says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.clients import openai_client
from tests.support.fake_searxng import FakeSearxng, PageServer, flags
from tests.support.schema import validate_event
from tests.support.server import Server, start_server
from tests.support.sse import stream_events

TIMEOUT = 900  # generous: a loaded two-core machine is slow
SOURCES = "web_search_call.action.sources"
CODEX_REQUEST = Path(__file__).parents[1] / "clients" / "data" / "codex-0.171.0-request.json"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, searxng: FakeSearxng) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("web-search"))
    srv = start_server(tmp, "--threads", "2", *flags(searxng))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url, timeout=TIMEOUT) as sdk:
        yield sdk


def logged(server: Server, text: str) -> bool:
    """Whether the server's log says `text` (the banner comes just after /health answers)."""
    deadline = time.monotonic() + 30
    while text not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    return text in server.log()


def ask(client: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("tools", [{"type": "web_search"}])
    kw.setdefault("tool_choice", {"type": "web_search"})
    kw.setdefault("input", "What is the capital of France? Search the web.")
    return client.responses.create(model=BUNDLED_ALIAS, max_output_tokens=200, temperature=0, **kw)


def test_a_forced_search_has_its_sources_only_when_included(
    client: openai.OpenAI, searxng: FakeSearxng
) -> None:
    response = ask(client, include=[SOURCES])
    assert response.status in ("completed", "incomplete"), response.error
    searched = response.output[0]
    assert searched.type == "web_search_call" and searched.status == "completed"
    action = searched.action
    assert action.type == "search" and action.query and action.query in searxng.queries
    assert [s.url for s in action.sources] == [r["url"] for r in searxng.answer(action.query)]
    assert [tool.type for tool in response.tools] == ["web_search"]
    # Stored: GET answers the same item.
    assert client.responses.retrieve(response.id).output[0] == searched

    plain = ask(client)
    assert plain.output[0].type == "web_search_call" and plain.output[0].action.sources is None


def test_allowed_domains_keep_the_sources_to_them(client: openai.OpenAI) -> None:
    tool = {"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}
    response = ask(client, tools=[tool], include=[SOURCES])
    searched = response.output[0]
    assert searched.type == "web_search_call" and searched.status == "completed"
    assert searched.action.sources, "the corpus has a page on example.org"
    assert all("docs.example.org" in s.url for s in searched.action.sources)


def test_streaming_events_in_order(server: Server) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "input": "Who carries loads in the Andes?",
        "tools": [{"type": "web_search_preview", "search_context_size": "low"}],
        "tool_choice": {"type": "web_search_preview"},
        "max_output_tokens": 200,
        "temperature": 0,
        "stream": True,
    }
    events = stream_events(f"{server.base_url}/responses", body, TIMEOUT)
    for event in events:
        validate_event(event)
    item_id = next(
        e["item"]["id"]
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "web_search_call"
    )
    of_item = [
        e["type"]
        for e in events
        if e.get("item_id") == item_id or e.get("item", {}).get("id") == item_id
    ]
    assert of_item == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    assert events[-1]["type"] in ("response.completed", "response.incomplete")


def test_streamed_annotations_are_the_final_response_s(server: Server) -> None:
    """Each url_citation streams as response.output_text.annotation.added (OpenAI's event,
    checked by the spec and the SDK's type) before its text is done; the final and the
    stored response hold exactly the annotations streamed, in order."""
    body = {
        "model": BUNDLED_ALIAS,
        "instructions": "Answer with the URL of the page you found, nothing else.",
        "input": "Which web page says what the capital of France is?",
        "tools": [{"type": "web_search"}],
        "tool_choice": {"type": "web_search"},
        "max_output_tokens": 200,
        "temperature": 0,
        "stream": True,
    }
    events = stream_events(f"{server.base_url}/responses", body, TIMEOUT)
    streamed: dict[tuple[str, int], list[Any]] = {}
    for event in events:
        validate_event(event)
        if event["type"] == "response.output_text.annotation.added":
            openai.types.responses.ResponseOutputTextAnnotationAddedEvent.model_validate(
                event, strict=True
            )
            notes = streamed.setdefault((event["item_id"], event["content_index"]), [])
            assert event["annotation_index"] == len(notes)
            notes.append(event["annotation"])
            done = [
                e["type"]
                for e in events[events.index(event) :]
                if e.get("item_id") == event["item_id"]
                and e["type"].startswith(("response.output_text.", "response.content_part."))
            ]
            assert done[-2:] == ["response.output_text.done", "response.content_part.done"]
    final = events[-1]["response"]
    held = {
        (item["id"], index): part["annotations"]
        for item in final["output"]
        if item["type"] == "message"
        for index, part in enumerate(item["content"])
        if part.get("annotations")
    }
    # At temperature 0 the bundled model writes the URL of a page it found.
    assert held, f"no annotation: {final['output'][-1]}"
    assert held == streamed
    assert all(n["type"] == "url_citation" for notes in held.values() for n in notes)
    stored = httpx.get(f"{server.base_url}/responses/{final['id']}", timeout=30).json()
    assert stored["output"] == final["output"]


def test_a_page_on_loopback_is_never_fetched(client: openai.OpenAI, pages: PageServer) -> None:
    url = f"{pages.url}/secret.html"
    response = ask(
        client,
        input=f"Open the page {url}",
        tool_choice={"type": "function", "name": "open_page"},
    )
    opened = response.output[0]
    assert opened.type == "web_search_call" and opened.action.type == "open_page"
    # Whatever URL the tiny model wrote, nothing reached the loopback page server.
    assert pages.paths == []
    if opened.action.url == url:
        assert opened.status == "failed"


def test_a_provider_that_is_down_fails_the_call_not_the_response(
    client: openai.OpenAI, searxng: FakeSearxng
) -> None:
    searxng.down = True
    try:
        response = ask(client)
    finally:
        searxng.down = False
    assert response.status in ("completed", "incomplete"), response.error
    assert response.output[0].type == "web_search_call"
    assert response.output[0].status == "failed"


def test_models_say_which_provider_runs_it(server: Server) -> None:
    listed = httpx.get(f"{server.base_url}/models", timeout=30).json()
    assert listed["data"][0]["meta"]["web_search"] == {"run": True, "provider": "searxng"}
    assert "web_search" in listed["models"][0]["capabilities"]
    assert logged(server, "web_search  searxng at http://127.0.0.1:")


def test_without_a_provider_the_tool_is_left_out_and_said_so(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    bare = start_server(Path(tmp_path_factory.mktemp("no-search")), "--threads", "2")
    try:
        listed = httpx.get(f"{bare.base_url}/models", timeout=30).json()
        said = listed["data"][0]["meta"]["web_search"]
        assert said["run"] is False and "no search provider" in said["why"]
        body = {
            "model": BUNDLED_ALIAS,
            "input": "hi",
            "tools": [{"type": "web_search"}],
            "max_output_tokens": 4,
        }
        reply = httpx.post(f"{bare.base_url}/responses", json=body, timeout=TIMEOUT)
        assert reply.status_code == 200, reply.text
        assert reply.json()["tools"] == []
        forced = {**body, "tool_choice": {"type": "web_search"}}
        refused = httpx.post(f"{bare.base_url}/responses", json=forced, timeout=TIMEOUT)
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "tool_choice"
        assert logged(bare, "web_search  off: no search provider")
    finally:
        bare.stop()


def test_codex_s_web_search_reaches_the_model(server: Server, searxng: FakeSearxng) -> None:
    """The body Codex 0.171.0 sends (tests/clients/data), its web_search forced: respond
    searches. Codex sends `external_web_access: false`, so only the search is offered."""
    body: dict[str, Any] = json.loads(CODEX_REQUEST.read_text())
    (web,) = [tool for tool in body["tools"] if tool["type"] == "web_search"]
    assert web.get("external_web_access") is False
    # As tests/clients/test_codex.py's server does for Codex (which sends neither): a
    # temperature of 0 and a limit; and one call a turn, so the tiny model's second call
    # cannot spend the limit before the first runs.
    body.update(
        model=BUNDLED_ALIAS,
        tool_choice={"type": "web_search"},
        max_output_tokens=300,
        temperature=0,
        parallel_tool_calls=False,
    )
    events = stream_events(f"{server.base_url}/responses", body, TIMEOUT)
    for event in events:
        validate_event(event)
    final = events[-1]["response"]
    searched = final["output"][0]
    assert searched["type"] == "web_search_call" and searched["action"]["type"] == "search"
    assert searched["status"] == "completed", final["status"]
    assert searched["action"]["query"] in searxng.queries
    assert web in final["tools"]
