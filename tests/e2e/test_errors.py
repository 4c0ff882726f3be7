"""Bad input gets a clear 4xx in the OpenAI envelope with `param` set; never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.server import Server, start_server


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with a 256-token context, to exercise truncation."""
    srv = start_server(Path(tmp_path_factory.mktemp("small")), "-c", "256")
    yield srv
    srv.stop()


def post(server: Server, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=120, **kwargs)


def assert_error(reply: httpx.Response, status: int, param: str | None) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    assert error["message"]
    return dict(error)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": [{"role": "bogus", "content": "x"}]}, "input[0].role"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_txt", "text": "x"}]}]},
            "input[0].content[0]",
        ),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"input": [{"type": "no_such_item"}]}, "input[0]"),
        ({"input": "x", "temperature": 5}, "temperature"),
        ({"input": "x", "top_p": 0}, "top_p"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "truncation": "sometimes"}, "truncation"),
        ({"input": "x", "metadata": {"k": "v" * 513}}, "metadata"),
        ({"input": "x", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format"),
        ({"input": 42}, "input"),
    ],
)
def test_invalid_fields_name_the_param(server: Server, body: dict[str, Any], param: str) -> None:
    error = assert_error(post(server, body), 400, param)
    assert error["type"] == "invalid_request_error"


def test_unknown_model_lists_available_ids(server: Server) -> None:
    error = assert_error(post(server, {"model": "gpt-9", "input": "x"}), 404, "model")
    assert "smollm2-135m" in error["message"]
    assert error["code"] == "model_not_found"


def test_images_get_a_clear_no_vision_error(server: Server) -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    body = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, image]}
        ]
    }
    error = assert_error(post(server, body), 400, "input[0].content[1]")
    assert "vision" in error["message"]


def test_not_json_and_not_an_object(server: Server) -> None:
    reply = httpx.post(f"{server.base_url}/responses", content=b"{nope", timeout=30)
    assert_error(reply, 400, None)
    assert_error(post(server, [1, 2]), 400, None)


def test_oversized_body_is_413(server: Server) -> None:
    reply = httpx.post(
        f"{server.base_url}/responses", content=b"x" * (33 * 1024 * 1024), timeout=60
    )
    assert_error(reply, 413, None)


def test_unknown_route_is_404_envelope(server: Server) -> None:
    reply = httpx.get(f"{server.base_url}/nothing-here")
    assert_error(reply, 404, None)


def test_openai_sdk_raises_typed_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="gpt-9", input="x")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="smollm2-135m", input="x", temperature=9)
    assert caught.value.param == "temperature"


def test_context_overflow_says_by_how_much(small: Server) -> None:
    error = assert_error(post(small, {"input": "word " * 400}), 400, "input")
    assert error["code"] == "context_length_exceeded"
    assert "256" in error["message"] and "truncation" in error["message"]


def test_truncation_auto_drops_oldest_items(small: Server) -> None:
    long_turn = {"role": "user", "content": "word " * 300}
    body = {
        "truncation": "auto",
        "max_output_tokens": 4,
        "input": [long_turn, {"role": "user", "content": "Hi"}],
    }
    reply = post(small, body)
    assert reply.status_code == 200, reply.text
    response = reply.json()
    assert response["truncation"] == "auto"
    assert response["usage"]["input_tokens"] < 256
