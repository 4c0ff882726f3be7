"""Respond processes on one PostgreSQL schema behave as one service: two side by side, and
three behind a real nginx configured as docs/deploy.md says."""

from __future__ import annotations

import asyncio
import itertools
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import openai
import pytest

from respond.engines.llamacpp import bundled_model_path
from tests.support.clients import openai_client
from tests.support.nginx import start_nginx
from tests.support.polling import has_text, stored_events, wait_for
from tests.support.queue import assert_ran_once, watch
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server, start_server
from tests.support.stores import drop_schema, new_schema_url
from tests.support.upstreams import start_llama_server

# Replicas that share a store share the sealing key (docs/deploy.md): a queued run is
# sealed by the replica that accepted it and opened by the one that starts it.
KEY = "the-same-on-every-replica"

pytestmark = pytest.mark.pg

MODEL = "smollm2-135m"


class _Long(TypedDict):
    input: str
    max_output_tokens: int


LONG: _Long = {"input": "Write a very long story about a dragon.", "max_output_tokens": 2000}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str]]:
    url, schema = new_schema_url()
    tmp = Path(tmp_path_factory.mktemp("replicas"))
    a = start_server(tmp / "a", "--threads", "1", "--store", url, "--secret-key", KEY)
    b = start_server(tmp / "b", "--threads", "1", "--store", url, "--secret-key", KEY)
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
    doomed = start_server(tmp_path, "--threads", "1", "--store", url, "--secret-key", KEY)
    with sdk(doomed) as on_doomed:
        made = on_doomed.responses.create(model=MODEL, background=True, **LONG)
        wait_for(doomed.base_url, made.id, has_text)
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait()
    # B notices the silent replica (no heartbeat for 10 s) and fails its run.
    failed = wait_for(b.base_url, made.id, lambda r: r["status"] == "failed", timeout=60)
    assert failed["error"]["code"] == "run_interrupted"
    assert stored_events(b.base_url, made.id)[-1]["type"] == "response.failed"


# ---------------------------------------------------------------- the background queue


@pytest.fixture(scope="module")
def capped_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """Two replicas on a schema of their own, each running one background run at a time."""
    url, schema = new_schema_url()
    tmp = Path(tmp_path_factory.mktemp("capped"))
    one = ("--threads", "1", "--store", url, "--secret-key", KEY, "--background-max", "1")
    a, b = start_server(tmp / "a", *one), start_server(tmp / "b", *one)
    yield a, b
    a.stop()
    b.stop()
    asyncio.run(drop_schema(schema))


def test_a_run_accepted_by_a_full_a_is_started_by_b(capped_pair: tuple[Server, Server]) -> None:
    a, b = capped_pair
    with sdk(a) as on_a:
        long = on_a.responses.create(model=MODEL, background=True, **LONG)
        wait_for(a.base_url, long.id, has_text)  # A's one place is taken
        short = on_a.responses.create(
            model=MODEL, background=True, input="Say hi.", max_output_tokens=12
        )
        assert short.status == "queued"
        final = wait_for(a.base_url, short.id, ended, timeout=180)
        assert final["status"] in ("completed", "incomplete"), final
        assert on_a.responses.retrieve(long.id).status == "in_progress"  # A is still busy
        assert on_a.responses.cancel(long.id).status == "cancelled"
    assert f"starting queued response {short.id}" in b.log()
    assert f"starting queued response {short.id}" not in a.log()
    assert_ran_once(stored_events(b.base_url, short.id))


def test_two_capped_replicas_work_through_a_queue(capped_pair: tuple[Server, Server]) -> None:
    a, b = capped_pair
    ids = []
    # Runs long enough (seconds each) that the watcher, whose sweeps slow down on a loaded
    # machine, sees two of them in progress in two sweeps in a row.
    for n in range(6):  # accepted by both replicas in turn
        with sdk((a, b)[n % 2]) as client:
            made = client.responses.create(
                model=MODEL, background=True, **LONG | {"max_output_tokens": 96}
            )
            ids.append(made.id)
    seen = watch(a.base_url, ids)
    assert seen.most_at_once == 2 and seen.waited, seen  # one on each replica at a time
    for response_id in ids:
        assert seen.final[response_id]["status"] in ("completed", "incomplete")
        assert_ran_once(stored_events(b.base_url, response_id))
    started = a.log() + b.log()
    assert all(started.count(f"starting queued response {i}") <= 1 for i in ids)


def test_a_survivor_runs_the_queued_runs_of_a_killed_replica(tmp_path: Path) -> None:
    """A replica alone on its schema, with one run going and two queued behind it, is
    SIGKILLed: a replica started later fails the started run and runs the queued ones."""
    url, schema = new_schema_url()
    one = ("--threads", "1", "--store", url, "--secret-key", KEY)
    doomed = start_server(tmp_path / "doomed", *one, "--background-max", "1")
    with sdk(doomed) as client:
        going = client.responses.create(model=MODEL, background=True, **LONG)
        wait_for(doomed.base_url, going.id, has_text)
        queued = [
            client.responses.create(
                model=MODEL, background=True, input="Say hi.", max_output_tokens=12
            )
            for _ in range(2)
        ]
        assert all(client.responses.retrieve(q.id).status == "queued" for q in queued)
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait()
    survivor = start_server(tmp_path / "survivor", *one)
    try:
        for q in queued:
            final = wait_for(survivor.base_url, q.id, ended, timeout=180)
            assert final["status"] in ("completed", "incomplete"), final
            assert_ran_once(stored_events(survivor.base_url, q.id))
            assert f"starting queued response {q.id}" in survivor.log()
        # The started one can't be resumed mid-generation: failed once A's lease ran out.
        failed = wait_for(survivor.base_url, going.id, ended, timeout=60)
        assert failed["status"] == "failed" and failed["error"]["code"] == "run_interrupted"
    finally:
        survivor.stop()
        asyncio.run(drop_schema(schema))


# ---------------------------------------------------------------- three replicas behind nginx


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[Server]]]:
    """Three replicas on one schema behind a real nginx, configured as docs/deploy.md says,
    in front of one upstream (llama.cpp's llama-server on the bundled model)."""
    url, schema = new_schema_url()
    tmp = Path(tmp_path_factory.mktemp("balanced"))
    upstream = start_llama_server(tmp / "upstream", bundled_model_path())
    # The upstream serves one request at a time for all three: under load a request may
    # wait longer than the default drain (30 s) for its turn.
    shared = {"RESPOND_SECRET_KEY": KEY, "RESPOND_DRAIN_TIMEOUT": "120"}
    front = ("--upstream", upstream.base_url, "--alias", MODEL, "--store", url)
    replicas = [start_server(tmp / name, *front, env=shared) for name in ("x", "y", "z")]
    lb = start_nginx(tmp / "nginx", replicas)
    yield lb, replicas
    lb.stop()
    for replica in replicas:
        replica.stop()
    upstream.stop()
    asyncio.run(drop_schema(schema))


def ended(body: dict[str, Any]) -> bool:
    return body["status"] not in ("queued", "in_progress")


def said_about(response_id: str, replicas: list[Server]) -> str:
    """What each replica logged about a response: which ran it, which was asked what."""
    return "\n".join(
        f"{replica.url}: {line}"
        for replica in replicas
        for line in replica.log().splitlines()
        if response_id in line
    )


def served(replica: Server) -> int:
    return replica.log().count("respond.access: ")


def test_through_nginx_three_replicas_act_as_one(balanced: tuple[Server, list[Server]]) -> None:
    lb, replicas = balanced
    before = [served(r) for r in replicas]
    with sdk(lb) as client:
        made = client.responses.create(model=MODEL, input="Hi", max_output_tokens=6)
        for _ in range(3):  # round-robin: each of these lands on another replica
            assert dump(client.responses.retrieve(made.id)) == dump(made)
        chained = client.responses.create(
            model=MODEL, input="More", previous_response_id=made.id, max_output_tokens=6
        )
        assert client.responses.retrieve(chained.id).previous_response_id == made.id
        assert [i.type for i in client.responses.input_items.list(chained.id).data] == ["message"]
        conv = client.conversations.create(items=[{"role": "user", "content": "Hello"}])
        for _ in range(2):
            client.responses.create(
                model=MODEL, conversation=conv.id, input="Hi", max_output_tokens=4
            )
        assert len(client.conversations.items.list(conv.id).data) == 5

        queued = client.responses.create(
            model=MODEL, background=True, input="Say hi.", max_output_tokens=16
        )
        done = wait_for(lb.base_url, queued.id, ended, timeout=180)
        assert done["status"] in ("completed", "incomplete")

        long = client.responses.create(model=MODEL, background=True, **LONG)
        wait_for(lb.base_url, long.id, has_text)
        cancelled = client.responses.cancel(long.id)
        assert cancelled.status == "cancelled", said_about(long.id, replicas)
        assert client.responses.retrieve(long.id).status == "cancelled"

        client.responses.delete(made.id)
        for _ in range(3):
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(made.id)
    after = [served(r) for r in replicas]
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)


def test_a_stream_resumes_through_nginx(balanced: tuple[Server, list[Server]]) -> None:
    lb, _ = balanced
    with sdk(lb) as client:
        stream = client.responses.create(
            model=MODEL, background=True, stream=True, **LONG | {"max_output_tokens": 48}
        )
        seen = []
        for event in stream:
            seen.append(dump(event))
            if len(seen) == 5:
                break
        stream.close()
        response_id = seen[0]["response"]["id"]
        rest = [
            dump(e)
            for e in client.responses.retrieve(
                response_id, stream=True, starting_after=seen[-1]["sequence_number"]
            )
        ]
    assert rest[0]["sequence_number"] == seen[-1]["sequence_number"] + 1
    assert rest[-1]["type"] in ("response.completed", "response.incomplete"), rest[-2:]
    for dumped in rest:
        validate_event(dumped)
    assert seen + rest == stored_events(lb.base_url, response_id)


def test_a_replica_killed_mid_run_loses_nothing(balanced: tuple[Server, list[Server]]) -> None:
    """SIGKILL a replica mid-stream, with a background run of its own waiting behind that
    stream (one model, one turn at a time): through nginx, the survivors serve both, and
    nothing stays queued or in progress."""
    lb, replicas = balanced
    doomed = replicas[0]
    with sdk(doomed) as on_doomed:
        streamed = on_doomed.responses.create(model=MODEL, stream=True, **LONG)
        first = []
        for event in streamed:
            first.append(dump(event))
            if event.type == "response.output_text.delta":
                break
        run = on_doomed.responses.create(
            model=MODEL, background=True, **LONG | {"max_output_tokens": 96}
        )
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()
    streamed_id = first[0]["response"]["id"]
    # A survivor notices the silent replica (no heartbeat for 10 s). The background run was
    # either started on it (then failed, it can't be resumed) or not yet (then queued again
    # and run by a survivor): which one depends on how far it got before the kill.
    final = wait_for(lb.base_url, run.id, ended, timeout=300)
    if final["status"] == "failed":
        assert final["error"]["code"] == "run_interrupted", final
    else:
        assert final["status"] in ("completed", "incomplete"), final
    assert_ran_once(stored_events(lb.base_url, run.id))
    with sdk(lb) as client:
        tail = client.responses.retrieve(run.id, stream=True, starting_after=0)
        resumed = [dump(event) for event in tail]
        assert resumed[-1]["response"]["status"] == final["status"], resumed[-2:]
        # A foreground stream is stored when it ends; one cut by a crash was never stored
        # (its client saw no terminal event), or ended failed: never left in progress.
        try:
            status = client.responses.retrieve(streamed_id).status
        except openai.NotFoundError:
            status = None
        assert status in (None, "failed"), status
        after = client.responses.create(model=MODEL, input="Still there?", max_output_tokens=4)
        assert after.status in ("completed", "incomplete")


# ---------------------------------------------------------------- a rolling restart


@dataclass
class Outcomes:
    ok: int = 0
    errors: list[str] = field(default_factory=list)
    background: list[str] = field(default_factory=list)


def steady_load(lb: Server, stop: threading.Event, outcomes: Outcomes) -> None:
    """One client as an application runs it (the SDK retries a 503 after its Retry-After):
    plain, streamed and background requests, one after the other, until `stop`."""
    with openai_client(lb.base_url) as plain:
        client = plain.with_options(max_retries=6)
        for turn in itertools.count():
            if stop.is_set():
                return
            try:
                kind = turn % 3
                if kind == 0:
                    made = client.responses.create(
                        model=MODEL, input="Hi", max_output_tokens=8, background=True
                    )
                    outcomes.background.append(made.id)
                elif kind == 1:
                    events = client.responses.create(
                        model=MODEL, input="Hi", max_output_tokens=8, stream=True
                    )
                    last = [event.type for event in events][-1]
                    assert last in ("response.completed", "response.incomplete"), last
                else:
                    done = client.responses.create(model=MODEL, input="Hi", max_output_tokens=8)
                    assert done.status in ("completed", "incomplete"), done.status
                outcomes.ok += 1
            except Exception as exc:  # every failure is the test's finding, not its crash
                cause = exc.__cause__ or exc.__context__
                outcomes.errors.append(f"turn {turn % 3}: {type(exc).__name__}: {exc} ({cause!r})")


def test_a_rolling_restart_behind_nginx_loses_no_request(
    balanced: tuple[Server, list[Server]],
) -> None:
    lb, replicas = balanced
    for index, replica in enumerate(replicas):  # an earlier test may have killed one
        if replica.process.poll() is not None:
            replicas[index] = replica.again()
    stop, outcomes = threading.Event(), Outcomes()
    clients = [threading.Thread(target=steady_load, args=(lb, stop, outcomes)) for _ in range(3)]
    for client in clients:
        client.start()
    try:
        time.sleep(2)
        for index, replica in enumerate(replicas):
            replica.process.send_signal(signal.SIGTERM)  # drains, then exits 0
            assert replica.process.wait(timeout=90) == 0, replica.log()[-3000:]
            replicas[index] = replica.again()  # the fixture stops the new one
            time.sleep(1)
    finally:
        stop.set()
        for client in clients:
            client.join(timeout=120)
    assert not outcomes.errors, outcomes.errors
    assert outcomes.ok >= 9, outcomes
    for response_id in outcomes.background:
        final = wait_for(lb.base_url, response_id, ended)
        assert final["status"] in ("completed", "incomplete"), final
