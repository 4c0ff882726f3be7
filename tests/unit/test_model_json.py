"""JSON the model writes into a call's arguments may name a lone surrogate (half of an
emoji's `\\ud83d\\ude00`) or NUL: the items made from it are still answered and stored. The
model is the FAKE ScriptedEngine (the bundled model writes such an escape only by chance)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond import _model_json as model_json
from respond import assemble, create_app
from respond._parts import Services
from respond.engines import _base as d
from respond.responses.sealing import Sealer
from respond.store.sqlite import SQLiteStore
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.sse import stream_events

# Written as the model writes it: JSON text with the escapes in it.
LONE = '"sun \\ud83d, moon \\ude00, nul \\u0000, pair \\ud83d\\ude00"'
MENDED = "sun \ufffd, moon \ufffd, nul \ufffd, pair \U0001f600"


def test_escapes_that_name_no_character_read_as_the_replacement_character() -> None:
    assert model_json.loads(LONE) == MENDED
    assert model_json.loads(f'{{{LONE}: [{LONE}, {{"k": 1}}]}}') == {MENDED: [MENDED, {"k": 1}]}
    assert model_json.loads('{"plain": "café 😀"}') == {"plain": "café 😀"}


def call(name: str, arguments: str) -> list[d.Delta]:
    return [
        d.ToolCallStart(call_id=f"call_{name}", name=name),
        d.ToolCallArgumentsDelta(arguments),
        d.ToolCallEnd(),
        d.Usage(input_tokens=10, output_tokens=5),
        d.Finish("stop"),
    ]


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine()


@pytest.fixture
def url(engine: ScriptedEngine, tmp_path: Path) -> Iterator[str]:
    store = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=600)
    services = Services(store=store, sealer=Sealer.ephemeral())
    with serving(create_app(assemble({engine.info.id: engine}, services=services))) as base:
        yield base


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather",
    "parameters": {"type": "object", "properties": {}},
    "defer_loading": True,
}
# name: (the request's tools, the function the model calls with LONE in its arguments,
# where the item holds the text)
CASES: dict[str, tuple[list[dict[str, Any]], tuple[str, str], Callable[[dict[str, Any]], Any]]] = {
    # respond runs the search: its call's arguments are an object in the item
    "tool_search": (
        [{"type": "tool_search"}, WEATHER],
        ("tool_search", f'{{"query": {LONE}}}'),
        lambda item: item["arguments"]["query"],
    ),
    # the client's custom tool: its input is the string the model wrote
    "custom": (
        [{"type": "custom", "name": "note"}],
        ("note", f'{{"input": {LONE}}}'),
        lambda item: item["input"],
    ),
    # the client's shell: its commands are read from the arguments
    "shell": (
        [{"type": "shell"}],
        ("shell", f'{{"commands": [{LONE}]}}'),
        lambda item: item["action"]["commands"][0],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_call_written_with_them_is_answered_and_stored(
    url: str, engine: ScriptedEngine, case: str
) -> None:
    tools, (name, arguments), text_of = CASES[case]
    for _ in range(2):  # answered whole, then streamed
        engine.enqueue(*call(name, arguments))
        if name == "tool_search":  # respond ran it: the model speaks again
            engine.enqueue(d.TextDelta("done"), d.Finish("stop"))
    body: dict[str, Any] = {"input": "go", "tools": tools, "tool_choice": "required"}
    reply = httpx.post(f"{url}/v1/responses", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    made = reply.json()
    streamed = stream_events(f"{url}/v1/responses", {**body, "stream": True}, 30)[-1]["response"]
    for response in (made, streamed):
        stored = httpx.get(f"{url}/v1/responses/{response['id']}", timeout=30).json()
        for seen in (response, stored):
            first = seen["output"][0]
            assert text_of(first) == MENDED, first
