"""The store under interleaved load from many clients, on SQLite and on PostgreSQL.

Clients hang up on background streams right after `response.created` (the case stream resume
exists for) and read those runs while they generate; others chain responses, talk in
conversations, cancel runs, upload files into vector stores and ask for ids that do not exist.
For a bounded time, then everything is checked: no 5xx, no connection dropped, every run
terminal, every stored stream replayable to its one terminal event, every acknowledged write
readable, and the server's log free of store errors.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import Server
from tests.support.stores import STORES, served_on

LOAD_SECONDS = 12
CLIENTS = 8
SHORT = {"model": "smollm2-135m", "max_output_tokens": 16, "temperature": 0}
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")
DONE = ("completed", "incomplete", "failed", "cancelled")


@pytest.fixture(scope="module", params=STORES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp(f"load-{request.param}"))
    with served_on(request.param, tmp, "--threads", "2", "--background-max", "4") as srv:
        yield srv


@dataclass
class Tally:
    """What the clients saw: every status, every dropped connection, every write acknowledged."""

    statuses: Counter[int] = field(default_factory=Counter)
    dropped: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    responses: set[str] = field(default_factory=set)  # acknowledged, stored
    conversations: dict[str, set[str]] = field(default_factory=dict)  # id -> item ids written
    vector_stores: set[str] = field(default_factory=set)
    rounds: Counter[str] = field(default_factory=Counter)  # by kind of work

    def saw(self, what: str, response: httpx.Response) -> httpx.Response:
        self.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.server_errors.append(f"{what}: {response.status_code} {response.text[:300]}")
        return response

    async def saw_stream(self, what: str, response: httpx.Response) -> httpx.Response:
        if response.status_code != 200:
            await response.aread()  # an error is a JSON body, not a stream
        return self.saw(what, response)


class Load:
    def __init__(self, http: httpx.AsyncClient, tally: Tally) -> None:
        self.http = http
        self.tally = tally

    async def call(self, what: str, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.tally.saw(what, await self.http.request(method, url, **kw))

    async def hung_up_stream(self) -> None:
        """A background stream the client leaves after response.created, then reads back."""
        body = {**SHORT, "input": "Tell me about rivers.", "background": True, "stream": True}
        async with self.http.stream("POST", "/v1/responses", json=body) as response:
            await self.tally.saw_stream("background stream", response)
            rid = await _first_event_id(response)
        self.tally.responses.add(rid)
        await asyncio.gather(
            self.resume(rid, after=2),
            *(self.call("GET", "GET", f"/v1/responses/{rid}") for _ in range(5)),
        )

    async def resume(self, rid: str, after: int) -> None:
        params = {"stream": "true", "starting_after": str(after)}
        async with self.http.stream("GET", f"/v1/responses/{rid}", params=params) as response:
            await self.tally.saw_stream("resume", response)
            if response.status_code == 200:
                await _read_to_terminal(response)

    async def chain(self) -> None:
        first = await self.call("chain 1", "POST", "/v1/responses", json={**SHORT, "input": "Hi."})
        if first.status_code != 200:
            return
        rid = first.json()["id"]
        self.tally.responses.add(rid)
        body = {**SHORT, "input": "And then?", "previous_response_id": rid}
        second = await self.call("chain 2", "POST", "/v1/responses", json=body)
        if second.status_code == 200:
            self.tally.responses.add(second.json()["id"])

    async def conversation(self) -> None:
        made = await self.call("conversation", "POST", "/v1/conversations", json={})
        if made.status_code != 200:
            return
        cid = made.json()["id"]
        self.tally.conversations[cid] = set()
        body = {**SHORT, "input": "Name a fruit.", "conversation": cid}
        turn = await self.call("conversation turn", "POST", "/v1/responses", json=body)
        if turn.status_code == 200:
            self.tally.conversations[cid] |= {item["id"] for item in turn.json()["output"]}
        await self.call("conversation items", "GET", f"/v1/conversations/{cid}/items")

    async def cancel(self) -> None:
        body = {
            **SHORT,
            "input": "Write a long story.",
            "max_output_tokens": 200,
            "background": True,
        }
        made = await self.call("background", "POST", "/v1/responses", json=body)
        if made.status_code != 200:
            return
        rid = made.json()["id"]
        self.tally.responses.add(rid)
        await self.call("cancel", "POST", f"/v1/responses/{rid}/cancel")

    async def unknown(self) -> None:
        response = await self.call("unknown id", "GET", "/v1/responses/resp_doesnotexist")
        assert response.status_code == 404, response.text

    async def file_into_store(self) -> None:
        files = {"file": ("notes.txt", b"Rivers run to the sea.\n" * 20, "text/plain")}
        made = await self.call(
            "upload", "POST", "/v1/files", files=files, data={"purpose": "assistants"}
        )
        if made.status_code != 200:
            return
        body = {"name": "load", "file_ids": [made.json()["id"]]}
        store = await self.call("vector store", "POST", "/v1/vector_stores", json=body)
        if store.status_code == 200:
            self.tally.vector_stores.add(store.json()["id"])


async def _first_event_id(response: httpx.Response) -> str:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            event = json.loads(line[len("data: ") :])
            assert event["type"] == "response.created", event
            rid: str = event["response"]["id"]
            return rid
    raise AssertionError("the stream ended before response.created")


async def _read_to_terminal(response: httpx.Response) -> list[dict[str, Any]]:
    events = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            events.append(json.loads(line[len("data: ") :]))
    assert events and events[-1]["type"] in TERMINAL, events[-1:] or "no events"
    return events


async def _drive(worker: Callable[[], Awaitable[None]], tally: Tally, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            await worker()
        except httpx.TransportError as exc:
            tally.dropped.append(f"{worker.__name__}: {type(exc).__name__} {exc}")
        tally.rounds[worker.__name__] += 1


@pytest.fixture
async def http(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
        yield client


async def test_interleaved_load_loses_nothing(server: Server, http: httpx.AsyncClient) -> None:
    tally = Tally()
    load = Load(http, tally)
    kinds = [
        load.hung_up_stream,
        load.chain,
        load.hung_up_stream,
        load.conversation,
        load.cancel,
        load.unknown,
        load.hung_up_stream,
        load.file_into_store,
    ]
    deadline = time.monotonic() + LOAD_SECONDS
    picks = itertools.islice(itertools.cycle(kinds), CLIENTS)
    await asyncio.gather(*(_drive(kind, tally, deadline) for kind in picks))

    assert not tally.server_errors, tally.server_errors
    assert not tally.dropped, tally.dropped
    # Every kind of work ran, the hung-up streams (the case that broke the store) most.
    assert set(tally.rounds) == {kind.__name__ for kind in kinds}, tally.rounds
    assert tally.rounds["hung_up_stream"] >= 3, tally.rounds
    for rid in tally.responses:
        await _check_run(http, rid, server)
    for cid, written in tally.conversations.items():
        listed = (await http.get(f"/v1/conversations/{cid}/items", params={"limit": 100})).json()
        assert written <= {item["id"] for item in listed["data"]}, cid
    for store_id in tally.vector_stores:
        got = await http.get(f"/v1/vector_stores/{store_id}")
        assert got.status_code == 200 and got.json()["file_counts"]["total"] == 1, got.text
    log = server.log()
    for sign in ("Traceback", "OperationalError", "could not store events"):
        assert sign not in log, log[log.find(sign) - 2000 : log.find(sign) + 2000]


async def _check_run(http: httpx.AsyncClient, rid: str, server: Server) -> None:
    """The run ends (within a bound), and its stored stream replays whole to that end."""
    for _ in range(240):
        body = (await http.get(f"/v1/responses/{rid}")).json()
        if body["status"] in DONE:
            break
        await asyncio.sleep(0.5)
    # A run that never ends says what the server logged of it (claims, starts, cancels).
    said = [line for line in server.log().splitlines() if rid in line]
    assert body["status"] in DONE, (body, said)
    async with http.stream("GET", f"/v1/responses/{rid}", params={"stream": "true"}) as replay:
        assert replay.status_code == 200
        events = await _read_to_terminal(replay)
    assert [e["sequence_number"] for e in events] == list(range(len(events))), rid
    assert sum(e["type"] in TERMINAL for e in events) == 1, rid
    assert events[-1]["response"]["status"] == body["status"], rid
