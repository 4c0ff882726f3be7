"""The code_interpreter tool and the Containers API on the bundled model, through the
official openai SDK (its own types parse every body; the test client also checks each body
and event against the spec and the SDK's event types).

The call is forced (`tool_choice: {"type": "code_interpreter"}`) and sampled at
temperature 0 under instructions the tiny model follows: it passes the user's one line of
Python to the tool, which respond really runs in its sandbox, so the output is known.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseCodeInterpreterToolCall, ToolParam
from openai.types.responses.response_code_interpreter_tool_call import OutputLogs

from tests.support.clients import openai_client
from tests.support.polling import folded, stored_events, wait_for
from tests.support.server import Server, start_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

MODEL = "smollm2-135m"
TIMEOUT = 900  # generous: a loaded two-core machine is slow
RUN_IT = "Run the user's Python code with the python tool."
AUTO: ToolParam = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    keys = Path(tmp_path_factory.mktemp("keys")) / "keys"
    keys.write_text("alice:key-alice\nbob:key-bob\n")
    srv = start_server(
        Path(tmp_path_factory.mktemp("code-interpreter")),
        "--threads",
        "2",
        "--api-key-file",
        str(keys),
        "--code-interpreter",
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url, api_key="key-alice", timeout=TIMEOUT) as sdk:
        yield sdk


def run(client: openai.OpenAI, code: str, **kw: Any) -> Any:
    kw.setdefault("tools", [AUTO])
    return client.responses.create(
        model=MODEL,
        instructions=RUN_IT,
        input=code,
        tool_choice={"type": "code_interpreter"},
        include=["code_interpreter_call.outputs"],
        temperature=0,
        max_output_tokens=80,
        **kw,
    )


def the_call(response: Response) -> ResponseCodeInterpreterToolCall:
    call = response.output[0]
    assert isinstance(call, ResponseCodeInterpreterToolCall), response.output
    return call


def logs(call: ResponseCodeInterpreterToolCall) -> str:
    return "".join(o.logs for o in call.outputs or [] if isinstance(o, OutputLogs))


def test_a_forced_call_runs_its_code_and_the_model_answers_in_the_same_response(
    client: openai.OpenAI,
) -> None:
    response = run(client, "print(6*7)")
    call = the_call(response)
    assert call.status == "completed"
    assert logs(call) == "42\n"  # the model wrote 6*7; the cell printed its value
    assert call.container_id.startswith("cntr_")
    assert response.output[-1].type == "message"  # generation went on after the call
    stored = client.responses.retrieve(response.id)
    assert stored.model_dump(exclude={"usage"}) == response.model_dump(exclude={"usage"})
    container = client.containers.retrieve(call.container_id)  # made at the first call
    assert container.status == "running" and container.expires_after is not None
    assert container.expires_after.minutes == 20


def test_the_streamed_call_emits_openais_events_in_order_and_folds_into_the_stored_one(
    server: Server, client: openai.OpenAI
) -> None:
    with run(client, "print(6*7)", stream=True) as stream:
        events = [event.model_dump(mode="json", exclude_unset=True) for event in stream]
    call_events = [
        e["type"]
        for e in events
        if e["type"].startswith("response.code_interpreter_call")
        or e.get("item", {}).get("type") == "code_interpreter_call"
    ]
    deltas = call_events.count("response.code_interpreter_call_code.delta")
    assert deltas >= 1
    assert call_events == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        *["response.code_interpreter_call_code.delta"] * deltas,
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
    ]
    done = next(e for e in events if e["type"] == "response.code_interpreter_call_code.done")
    streamed = [e["delta"] for e in events if e["type"].endswith("_code.delta")]
    assert "".join(streamed) == done["code"]
    final = events[-1]["response"]
    headers = {"Authorization": "Bearer key-alice"}
    stored = stored_events(server.base_url, final["id"], headers=headers)
    assert folded(stored) == final
    item = final["output"][0]
    assert item["outputs"] == [{"type": "logs", "logs": "42\n"}]


def test_outputs_come_only_when_included(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        instructions=RUN_IT,
        input="print(6*7)",
        tools=[AUTO],
        tool_choice={"type": "code_interpreter"},
        temperature=0,
        max_output_tokens=80,
    )
    call = the_call(response)
    assert (call.status, call.outputs) == ("completed", None)


def test_a_chain_keeps_its_container(client: openai.OpenAI) -> None:
    first = run(client, "print(6*7)")
    second = run(client, "print(6*7)", previous_response_id=first.id)
    calls = [item for item in second.output if isinstance(item, ResponseCodeInterpreterToolCall)]
    assert calls and calls[0].container_id == the_call(first).container_id
    assert calls[0].status == "completed"


def test_code_runs_on_the_files_of_a_container_made_with_the_containers_api(
    client: openai.OpenAI,
) -> None:
    container = client.containers.create(name="notes")
    client.containers.files.create(container.id, file=("data.txt", b"hello from the container"))
    response = run(
        client,
        "print(open('data.txt').read())",
        tools=[{"type": "code_interpreter", "container": container.id}],
    )
    call = the_call(response)
    assert call.container_id == container.id
    assert logs(call) == "hello from the container\n"
    echoed = response.tools[0].model_dump(exclude_none=True)
    assert echoed == {"type": "code_interpreter", "container": container.id}


def test_the_containers_api_through_the_sdk(client: openai.OpenAI) -> None:
    uploaded = client.files.create(file=("rows.csv", b"a,b\n1,2\n"), purpose="user_data")
    made = client.containers.create(
        name="analysis",
        expires_after={"anchor": "last_active_at", "minutes": 5},
        file_ids=[uploaded.id],
    )
    assert (made.name, made.status, made.object) == ("analysis", "running", "container")
    assert made.expires_after is not None and made.expires_after.minutes == 5
    (copied,) = client.containers.files.list(made.id).data
    assert (copied.path, copied.bytes, copied.source) == ("/mnt/data/rows.csv", 8, "user")
    added = client.containers.files.create(made.id, file=("notes.txt", b"n"))
    by_id = client.containers.files.create(made.id, file_id=uploaded.id)  # copied again
    assert by_id.path == "/mnt/data/rows.csv" and added.path == "/mnt/data/notes.txt"
    assert client.containers.files.retrieve(added.id, container_id=made.id).bytes == 1
    content = client.containers.files.content.retrieve(added.id, container_id=made.id)
    assert content.read() == b"n"
    listed = [f.path for f in client.containers.files.list(made.id, order="asc")]
    assert sorted(listed) == ["/mnt/data/notes.txt", "/mnt/data/rows.csv"]
    client.containers.files.delete(added.id, container_id=made.id)
    with pytest.raises(openai.NotFoundError):
        client.containers.files.retrieve(added.id, container_id=made.id)
    other = client.containers.create(name="analysis")
    # Pages of one, newest first (two made in the same second are ordered by id).
    page = client.containers.list(limit=1, name="analysis")
    assert len(page.data) == 1 and page.has_more
    after = client.containers.list(limit=1, name="analysis", after=page.data[0].id)
    assert not after.has_more
    assert {page.data[0].id, after.data[0].id} == {made.id, other.id}
    client.containers.delete(other.id)
    with pytest.raises(openai.NotFoundError):
        client.containers.retrieve(other.id)


def test_another_tenants_container_is_missing(server: Server, client: openai.OpenAI) -> None:
    mine = client.containers.create(name="alice's")
    with openai_client(server.base_url, api_key="key-bob") as bob:
        with pytest.raises(openai.NotFoundError):
            bob.containers.retrieve(mine.id)
        assert mine.id not in [c.id for c in bob.containers.list()]
        with pytest.raises(openai.NotFoundError) as raised:
            bob.responses.create(
                model=MODEL,
                input="hi",
                tools=[{"type": "code_interpreter", "container": mine.id}],
            )
        assert raised.value.body["param"] == "tools[0].container"  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (
            {"tools": [{"type": "code_interpreter", "container": "cntr_nope"}]},
            404,
            "tools[0].container",
        ),
        (
            {"tools": [{"type": "code_interpreter", "container": {"type": "x"}}]},
            400,
            "tools[0].container",
        ),
        ({"tools": [{"type": "code_interpreter"}]}, 400, "tools[0].container"),
        (
            {
                "tools": [
                    {
                        "type": "code_interpreter",
                        "container": {"type": "auto", "file_ids": ["file_no"]},
                    }
                ]
            },
            404,
            "tools[0].container.file_ids",
        ),
        (
            {"tools": [AUTO, {"type": "function", "name": "python"}]},
            400,
            "tools[0]",
        ),
        ({"tool_choice": {"type": "code_interpreter"}}, 400, "tool_choice"),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(
    server: Server, body: dict[str, Any], status: int, param: str
) -> None:
    reply = httpx.post(
        f"{server.base_url}/responses",
        json={"model": MODEL, "input": "hi", **body},
        headers={"Authorization": "Bearer key-alice"},
        timeout=60,
    )
    assert reply.status_code == status, reply.text
    assert reply.json()["error"]["param"] == param


def test_a_background_run_calls_and_its_stored_stream_replays(
    server: Server, client: openai.OpenAI
) -> None:
    queued = run(client, "print(6*7)", background=True)
    headers = {"Authorization": "Bearer key-alice"}
    body = wait_for(
        server.base_url,
        queued.id,
        lambda b: b["status"] not in ("queued", "in_progress"),
        timeout=TIMEOUT,
        headers=headers,
    )
    assert body["status"] in ("completed", "incomplete"), body
    item = body["output"][0]
    assert item["type"] == "code_interpreter_call" and item["outputs"][0]["logs"] == "42\n"
    events = stored_events(server.base_url, queued.id, headers=headers)
    assert "response.code_interpreter_call.interpreting" in [e["type"] for e in events]
    assert folded(events) == body


def test_the_tool_and_the_api_are_off_without_the_flag(tmp_path: Path) -> None:
    srv = start_server(tmp_path, "--threads", "2")
    try:
        with openai_client(srv.base_url, timeout=TIMEOUT) as sdk:
            for _ in range(2):
                response = sdk.responses.create(
                    model=MODEL, input="Hi", tools=[AUTO], max_output_tokens=8
                )
                assert response.status in ("completed", "incomplete")
                assert all(item.type != "code_interpreter_call" for item in response.output)
                assert response.tools == []  # as every tool type respond does not run
            with pytest.raises(openai.APIStatusError) as raised:
                sdk.containers.create(name="x")
            assert raised.value.status_code == 501
            assert "--code-interpreter" in raised.value.message
    finally:
        srv.stop()
    assert srv.log().count("tool type 'code_interpreter' is not run") == 1


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--code-interpreter-python", "/no/python"), "cannot run the code's interpreter"),
    ],
)
def test_respond_refuses_to_start_a_code_interpreter_that_cannot_run(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    srv = start_server(tmp_path, "--code-interpreter", *flags, wait_ready=False)
    deadline = time.monotonic() + 120
    while srv.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    code = srv.process.poll()
    srv.stop()
    assert code not in (None, 0)
    assert says in srv.log() and "--code-interpreter" in srv.log()
