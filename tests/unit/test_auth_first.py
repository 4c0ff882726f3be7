"""Every route that needs a key asks for it before it reads or validates anything else: a
caller without a key gets a 401, never a 400 naming the route's fields."""

from __future__ import annotations

import re

import httpx
import pytest

from respond import Services, Settings, assemble, create_app
from respond.api._common import KeyRing
from respond.testing import ScriptedEngine
from tests.support.inproc import serving

KEYED = Services(keys=KeyRing.from_lines(["alice:sk-alice"]))
# Malformed or oversized in every way a route checks before its handler runs.
BAD_BODY = b'{"model": 1, "input": {"nested": [' + b"x" * 64 + b"]"
BAD_QUERY = "?limit=not-a-number&order=sideways&after=&include[]=nonsense"


def _routes() -> list[tuple[str, str]]:
    """Every method and path of the API, as its OpenAPI document lists them."""
    engine = ScriptedEngine()
    paths = create_app(assemble({engine.info.id: engine}, services=KEYED)).openapi()["paths"]
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, operations in sorted(paths.items())
        if path.startswith("/v1/")
        for method in sorted(operations)
    ]


ROUTES = _routes()


def test_every_json_route_is_listed() -> None:
    """The sweep below covers the API's routes (not an empty list that passes vacuously)."""
    paths = {path for _, path in ROUTES}
    for expected in (
        "/v1/responses",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/embeddings",
        "/v1/files",
        "/v1/vector_stores",
        "/v1/conversations",
        "/v1/containers",
    ):
        assert expected in paths, sorted(paths)


@pytest.fixture(scope="module")
def url() -> object:
    engine = ScriptedEngine()
    app = create_app(assemble({engine.info.id: engine}, Settings(max_body_mb=1), KEYED))
    with serving(app) as served:
        yield served


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_bad_request_without_a_key_is_a_401(url: str, method: str, path: str) -> None:
    reply = httpx.request(
        method,
        f"{url}{path}{BAD_QUERY}",
        content=BAD_BODY,
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 401, reply.text
    body = reply.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and body["error"]["type"] == "authentication_error", body
    else:
        assert body["error"]["code"] == "invalid_api_key", body


def test_with_the_key_the_same_body_is_the_400_it_was(url: str) -> None:
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": 1, "messages": "not a list"},
        headers={"authorization": "Bearer sk-alice"},
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"], reply.text
