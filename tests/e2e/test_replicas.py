"""Two respond processes on one PostgreSQL schema behave as one service."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.clients import openai_client
from tests.support.polling import has_text, stored_events, wait_for
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server
from tests.support.stores import drop_schema, new_schema_url

pytestmark = pytest.mark.pg

MODEL = "smollm2-135m"
LONG = {"input": "Write a very long story about a dragon.", "max_output_tokens": 2000}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str]]:
    url, schema = new_schema_url()
    tmp = Path(tmp_path_factory.mktemp("replicas"))
    a = start_server(tmp / "a", "--threads", "1", "--store", url)
    b = start_server(tmp / "b", "--threads", "1", "--store", url)
    yield a, b, url
    a.stop()
    b.stop()
    asyncio.run(drop_schema(schema))


def sdk(server: Server) -> openai.OpenAI:
    return openai_client(server.base_url)


def dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", exclude_unset=True)
    return data


def test_created_on_a_is_served_by_b(pair: tuple[Server, Server, str]) -> None:
    a, b, _ = pair
    with sdk(a) as on_a, sdk(b) as on_b:
        made = on_a.responses.create(model=MODEL, input="Hi", max_output_tokens=6)
        assert dump(on_b.responses.retrieve(made.id)) == dump(made)
        assert [i.id for i in on_b.responses.input_items.list(made.id).data] == [
            i.id for i in on_a.responses.input_items.list(made.id).data
        ]
        chained = on_b.responses.create(
            model=MODEL, input="More", previous_response_id=made.id, max_output_tokens=6
        )
        validate_response(dump(chained))
        assert on_a.responses.retrieve(chained.id).previous_response_id == made.id
        conv = on_a.conversations.create(items=[{"role": "user", "content": "Hello"}])
        on_b.responses.create(model=MODEL, conversation=conv.id, input="Hi", max_output_tokens=4)
        assert len(on_a.conversations.items.list(conv.id).data) == 3
        on_b.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            on_a.responses.retrieve(made.id)


def test_live_tail_on_b_of_a_run_on_a(pair: tuple[Server, Server, str]) -> None:
    a, b, _ = pair
    with sdk(a) as on_a, sdk(b) as on_b:
        made = on_a.responses.create(
            model=MODEL, background=True, **LONG | {"max_output_tokens": 48}
        )
        live = [dump(e) for e in on_b.responses.retrieve(made.id, stream=True, starting_after=1)]
    assert live[0]["sequence_number"] == 2, live[:2]
    assert live[-1]["type"] in ("response.completed", "response.incomplete"), live[-3:]
    assert live[-1]["response"]["status"] in ("completed", "incomplete")
    for event in live:
        validate_event(event)
    assert live == stored_events(a.base_url, made.id, after=1)


def test_cancel_on_b_stops_generation_on_a(pair: tuple[Server, Server, str]) -> None:
    a, b, _ = pair
    with sdk(a) as on_a, sdk(b) as on_b:
        made = on_a.responses.create(model=MODEL, background=True, **LONG)
        wait_for(b.base_url, made.id, has_text)
        cancelled = on_b.responses.cancel(made.id)
        assert cancelled.status == "cancelled"
        events = stored_events(a.base_url, made.id)
        assert events[-1]["response"]["status"] == "cancelled"
        time.sleep(1)
        assert stored_events(b.base_url, made.id) == events  # A stopped generating
    assert f"cancelling {made.id} on request from another replica" in a.log()


def test_b_fails_the_runs_of_a_dead_a(pair: tuple[Server, Server, str], tmp_path: Path) -> None:
    _, b, url = pair
    doomed = start_server(tmp_path, "--threads", "1", "--store", url)
    with sdk(doomed) as on_doomed:
        made = on_doomed.responses.create(model=MODEL, background=True, **LONG)
        wait_for(doomed.base_url, made.id, has_text)
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait()
    # B notices the silent replica (no heartbeat for 10 s) and fails its run.
    failed = wait_for(b.base_url, made.id, lambda r: r["status"] == "failed", timeout=60)
    assert failed["error"]["code"] == "run_interrupted"
    assert stored_events(b.base_url, made.id)[-1]["type"] == "response.failed"
