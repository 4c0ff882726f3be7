"""Ids on every route: one whose shape cannot exist is a 400 naming the field; a well-formed
one that names nothing (or another tenant's object) is a 404, as OpenAI answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond._ids import PREFIXES
from tests.support.server import Server, start_server
from tests.support.ws import receive, send, socket

MODEL = "smollm2-135m"
ALICE = {"Authorization": "Bearer key-alice"}
BOB = {"Authorization": "Bearer key-bob"}
MALFORMED = "nope"  # no kind of id has this shape
MSG = [{"type": "message", "role": "user", "content": "x"}]
CI_FILES = "tools[0].container.file_ids"

# (method, path, body, the field named, the kind of id it holds). `{id}` is the id under test;
# {vs}, {cntr}, {conv} are real objects, so the id under test is the only one that can fail.
ROUTES: list[tuple[str, str, Any, str, str]] = [
    ("GET", "/responses/{id}", None, "response_id", "response"),
    ("DELETE", "/responses/{id}", None, "response_id", "response"),
    ("GET", "/responses/{id}/input_items", None, "response_id", "response"),
    ("POST", "/responses/{id}/cancel", None, "response_id", "response"),
    ("POST", "/responses", {"previous_response_id": "{id}"}, "previous_response_id", "response"),
    (
        "POST",
        "/responses/input_tokens",
        {"previous_response_id": "{id}"},
        "previous_response_id",
        "response",
    ),
    (
        "POST",
        "/responses/compact",
        {"previous_response_id": "{id}"},
        "previous_response_id",
        "response",
    ),
    ("POST", "/responses", {"conversation": "{id}"}, "conversation", "conversation"),
    ("POST", "/responses", {"conversation": {"id": "{id}"}}, "conversation", "conversation"),
    ("GET", "/conversations/{id}", None, "conversation_id", "conversation"),
    ("POST", "/conversations/{id}", {"metadata": {}}, "conversation_id", "conversation"),
    ("DELETE", "/conversations/{id}", None, "conversation_id", "conversation"),
    ("GET", "/conversations/{id}/items", None, "conversation_id", "conversation"),
    ("POST", "/conversations/{id}/items", {"items": MSG}, "conversation_id", "conversation"),
    ("GET", "/conversations/{id}/items/msg_1", None, "conversation_id", "conversation"),
    ("DELETE", "/conversations/{id}/items/msg_1", None, "conversation_id", "conversation"),
    ("GET", "/files/{id}", None, "file_id", "file"),
    ("GET", "/files/{id}/content", None, "file_id", "file"),
    ("DELETE", "/files/{id}", None, "file_id", "file"),
    ("POST", "/vector_stores", {"file_ids": ["{id}"]}, "file_ids[0]", "file"),
    ("GET", "/vector_stores/{id}", None, "vector_store_id", "vector_store"),
    ("POST", "/vector_stores/{id}", {"name": "x"}, "vector_store_id", "vector_store"),
    ("DELETE", "/vector_stores/{id}", None, "vector_store_id", "vector_store"),
    ("POST", "/vector_stores/{id}/search", {"query": "x"}, "vector_store_id", "vector_store"),
    ("GET", "/vector_stores/{id}/files", None, "vector_store_id", "vector_store"),
    ("POST", "/vector_stores/{vs}/files", {"file_id": "{id}"}, "file_id", "file"),
    ("GET", "/vector_stores/{vs}/files/{id}", None, "file_id", "file"),
    ("POST", "/vector_stores/{vs}/files/{id}", {"attributes": {}}, "file_id", "file"),
    ("DELETE", "/vector_stores/{vs}/files/{id}", None, "file_id", "file"),
    ("GET", "/vector_stores/{vs}/files/{id}/content", None, "file_id", "file"),
    ("POST", "/vector_stores/{vs}/file_batches", {"file_ids": ["{id}"]}, "file_ids[0]", "file"),
    ("GET", "/vector_stores/{vs}/file_batches/{id}", None, "batch_id", "file_batch"),
    ("POST", "/vector_stores/{vs}/file_batches/{id}/cancel", None, "batch_id", "file_batch"),
    ("GET", "/vector_stores/{vs}/file_batches/{id}/files", None, "batch_id", "file_batch"),
    ("POST", "/containers", {"name": "x", "file_ids": ["{id}"]}, "file_ids[0]", "file"),
    ("GET", "/containers/{id}", None, "container_id", "container"),
    ("DELETE", "/containers/{id}", None, "container_id", "container"),
    ("GET", "/containers/{id}/files", None, "container_id", "container"),
    ("POST", "/containers/{cntr}/files", {"file_id": "{id}"}, "file_id", "file"),
    ("GET", "/containers/{cntr}/files/{id}", None, "file_id", "container_file"),
    ("GET", "/containers/{cntr}/files/{id}/content", None, "file_id", "container_file"),
    ("DELETE", "/containers/{cntr}/files/{id}", None, "file_id", "container_file"),
    (
        "POST",
        "/responses",
        {"tools": [{"type": "code_interpreter", "container": "{id}"}]},
        "tools[0].container",
        "container",
    ),
    (
        "POST",
        "/responses",
        {
            "tools": [
                {"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["{id}"]}}
            ]
        },
        CI_FILES,
        "file",
    ),
    (
        "POST",
        "/responses",
        {"tools": [{"type": "file_search", "vector_store_ids": ["{id}"]}]},
        "tools[0].vector_store_ids",
        "vector_store",
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    keys = Path(tmp_path_factory.mktemp("keys")) / "keys"
    keys.write_text("alice:key-alice\nbob:key-bob\n")
    srv = start_server(
        Path(tmp_path_factory.mktemp("ids")),
        "--threads",
        "2",
        "--api-key-file",
        str(keys),
        "--code-interpreter",
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def parents(server: Server) -> dict[str, str]:
    """Alice's real vector store, container and conversation, for the nested routes."""

    def made(path: str, body: dict[str, Any]) -> str:
        reply = httpx.post(f"{server.base_url}{path}", json=body, headers=ALICE, timeout=60)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["id"])

    return {
        "vs": made("/vector_stores", {"name": "ids"}),
        "cntr": made("/containers", {"name": "ids"}),
        "conv": made("/conversations", {}),
    }


def call(
    server: Server, route: tuple[str, str, Any, str, str], value: str, parents: dict[str, str]
) -> httpx.Response:
    method, path, body, _, _ = route
    fill = {**parents, "id": value}
    if isinstance(body, dict) and path.startswith("/responses") and not path.endswith("}"):
        body = {"model": MODEL, "input": "x", **body}
    content = None if body is None else json.dumps(body).replace('"{id}"', json.dumps(value))
    return httpx.request(
        method,
        server.base_url + path.format(**fill),
        content=content,
        headers={**ALICE, "Content-Type": "application/json"},
        timeout=60,
    )


def openai_error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    error: dict[str, Any] = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]} {r[3]}")
def test_a_malformed_id_is_a_400_naming_the_field(
    server: Server, parents: dict[str, str], route: tuple[str, str, Any, str, str]
) -> None:
    error = openai_error(call(server, route, MALFORMED, parents), 400)
    assert error["param"] == route[3]
    assert error["type"] == "invalid_request_error"
    assert f"begins with '{PREFIXES[route[4]]}'" in error["message"]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]} {r[3]}")
def test_a_well_formed_missing_id_is_a_404(
    server: Server, parents: dict[str, str], route: tuple[str, str, Any, str, str]
) -> None:
    missing = f"{PREFIXES[route[4]]}_{'0' * 48}"
    error = openai_error(call(server, route, missing, parents), 404)
    assert error["code"].endswith("not_found")


@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("previous_response_id", MALFORMED, 400),
        ("conversation", MALFORMED, 400),
        ("previous_response_id", f"resp_{'0' * 48}", 404),
        ("conversation", f"conv_{'0' * 48}", 404),
    ],
)
def test_websocket_create_checks_ids_too(
    server: Server, field: str, value: str, status: int
) -> None:
    with socket(server, headers=ALICE) as conn:
        send(conn, {"type": "response.create", "model": MODEL, "input": "x", field: value})
        error = receive(conn)
    assert error["type"] == "error" and error["status"] == status
    assert error["error"]["param"] == field


def test_another_tenants_ids_are_missing_ones(server: Server, parents: dict[str, str]) -> None:
    """Bob gets for Alice's objects exactly what he gets for ids that exist nowhere."""
    for path, kind in [
        ("/vector_stores/", "vs"),
        ("/containers/", "cntr"),
        ("/conversations/", "conv"),
    ]:
        theirs = httpx.get(f"{server.base_url}{path}{parents[kind]}", headers=BOB, timeout=60)
        nowhere = httpx.get(f"{server.base_url}{path}{kind}_{'0' * 48}", headers=BOB, timeout=60)
        assert openai_error(theirs, 404)["code"] == openai_error(nowhere, 404)["code"]
