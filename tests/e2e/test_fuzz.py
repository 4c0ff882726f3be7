"""Fuzzing with schemathesis against the OpenAPI document the server itself serves.

Bodies, path and query parameters are generated from /openapi.json (valid and invalid
ones) for the Responses, input_tokens, compact, Conversations and Chat Completions
routes. Every answer must be below 500, arrive in time, and, when it is a 4xx, carry the
error envelope with a code; the server must be healthy after. Bounded in examples per
route (and tokens per generation) to keep the whole run to a minute or two.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Err

from tests.support.server import Server, start_server

ROUTES = r"^/v1/(responses|conversations|chat/completions)"
EXAMPLES = 25  # per route and method
TOKENS = 4  # max_output_tokens of a generated request, so no example generates for long


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own: fuzzing leaves stored state and runs behind."""
    server = start_server(Path(tmp_path_factory.mktemp("fuzz")), "--threads", "1", "-n", "4")
    yield server
    assert server.process.poll() is None, "the server died while fuzzed"
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    server.stop()


def _operations(server: Server) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = []
    for result in schema.include(path_regex=ROUTES).get_all_operations():
        if isinstance(result, Err):
            raise result.err()  # the schema the server serves is itself broken
        operations.append(result.ok())
    return operations


def _bounded(case: Any) -> None:
    """Keep generation short: the fuzzer hunts request handling bugs, not long answers."""
    body = case.body
    if isinstance(body, dict):
        for key in ("max_output_tokens", "max_tokens", "max_completion_tokens"):
            value = body.get(key)
            # An integral float (2000.0) is a valid integer too: it would generate as long.
            if isinstance(value, int | float) and not isinstance(value, bool) and value > TOKENS:
                body[key] = TOKENS
        if body.get("background") is True:
            body["background"] = False  # a background run would outlive its example


def _check(case: Any, server: Server) -> None:
    _bounded(case)
    reply = case.call(base_url=server.url, timeout=60)
    assert reply.status_code < 500, f"{case.method} {case.formatted_path}: {reply.text[:500]}"
    if 400 <= reply.status_code < 500:
        error = reply.json()["error"]
        assert error["message"] and error["type"] and error["code"], error


def test_fuzzed_requests_get_no_5xx(fuzzed: Server) -> None:
    # schemathesis's own pytest plugin does not run under this pytest; its strategies
    # are driven by hypothesis directly, one operation (route and method) after another.
    operations = _operations(fuzzed)
    assert any(op.path == "/v1/responses" and op.method == "post" for op in operations)
    for operation in operations:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def fuzz(case: Any) -> None:
            _check(case, fuzzed)

        fuzz()
