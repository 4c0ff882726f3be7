"""POST /v1/embeddings with the bundled all-MiniLM-L6-v2, through the official SDK.

The vectors are compared with reference vectors of the real model: sentence-transformers
(PyTorch) on the same checkpoint, recorded in tests/e2e/data/minilm_reference.json by
tools/minilm_reference.py. respond runs the checkpoint converted to GGUF by llama.cpp.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.support.clients import openai_client
from tests.support.server import Server, start_server

MODEL = "all-minilm-l6-v2"
REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


def test_vectors_match_the_reference_model(client: openai.OpenAI) -> None:
    answer = client.embeddings.create(model=MODEL, input=REFERENCE["sentences"])
    assert answer.model == MODEL and answer.usage.prompt_tokens > len(REFERENCE["sentences"])
    assert [d.index for d in answer.data] == list(range(len(REFERENCE["sentences"])))
    for got, want, text in zip(
        answer.data, REFERENCE["vectors"], REFERENCE["sentences"], strict=True
    ):
        vector, expected = np.asarray(got.embedding), np.asarray(want)
        assert vector.shape == (384,)
        assert abs(np.linalg.norm(vector) - 1) < 1e-4
        assert float(vector @ expected) > 0.9999, text
        assert np.abs(vector - expected).max() < 2e-3, text


def test_float_and_base64_are_the_same_vector(server: Server) -> None:
    def embed(encoding: str) -> object:
        reply = httpx.post(
            f"{server.base_url}/embeddings",
            json={"model": MODEL, "input": "a heron", "encoding_format": encoding},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        return reply.json()["data"][0]["embedding"]

    floats = np.asarray(embed("float"))
    packed = embed("base64")
    assert isinstance(packed, str)
    decoded = np.frombuffer(base64.b64decode(packed), dtype="<f4")
    assert np.array_equal(decoded, floats.astype("<f4"))


def test_long_inputs_are_cut_to_the_model_window(client: openai.OpenAI) -> None:
    long = client.embeddings.create(model=MODEL, input="heron " * 2000)
    assert long.usage.prompt_tokens <= 256
    assert len(long.data[0].embedding) == 384


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": MODEL, "input": "x", "dimensions": 128}, 400, "dimensions"),
        ({"model": MODEL, "input": [1, 2, 3]}, 400, "input[0]"),
        ({"model": MODEL, "input": []}, 400, "input"),
        ({"model": MODEL, "input": ["ok", ""]}, 400, "input[1]"),
        ({"model": "text-embedding-3-small", "input": "x"}, 404, "model"),
        ({"model": MODEL}, 400, "input"),
        ({"model": MODEL, "input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
    ],
)
def test_bad_requests_name_the_param(
    server: Server, body: dict[str, object], status: int, param: str
) -> None:
    reply = httpx.post(f"{server.base_url}/embeddings", json=body, timeout=60)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["code"], error


def test_the_model_is_listed_after_the_chat_model(server: Server) -> None:
    listed = httpx.get(f"{server.base_url}/models", timeout=30).json()
    chat, embedding = listed["data"]
    assert chat["meta"]["n_ctx"] > 0 and "type" not in chat["meta"]
    assert embedding == {
        "id": MODEL,
        "object": "model",
        "created": chat["created"],
        "owned_by": "respond",
        "meta": {"type": "embedding", "dimensions": 384},
    }
    assert listed["models"][1]["name"] == MODEL
    assert listed["models"][1]["capabilities"] == ["embedding"]
    with openai_client(server.base_url) as sdk:  # the SDK reads it as a model like any other
        assert MODEL in [m.id for m in sdk.models.list()]


def test_the_model_is_the_only_dimensions_it_has(client: openai.OpenAI) -> None:
    answer = client.embeddings.create(model=MODEL, input="x", dimensions=384)
    assert len(answer.data[0].embedding) == 384


def test_another_gguf_model_or_none(tmp_path: Path) -> None:
    from respond.files._minilm import bundled_gguf

    converted = bundled_gguf()  # any GGUF embedding model: here, the converted MiniLM
    assert converted is not None
    own = tmp_path / "my-embedder.gguf"
    own.symlink_to(converted)
    server = start_server(tmp_path / "own", "--threads", "1", "--embedding-model", str(own))
    try:
        with openai_client(server.base_url) as sdk:
            answer = sdk.embeddings.create(model="my-embedder", input="a heron")
            assert answer.model == "my-embedder" and len(answer.data[0].embedding) == 384
            assert "my-embedder" in [m.id for m in sdk.models.list()]
    finally:
        server.stop()

    server = start_server(tmp_path / "none", "--threads", "1", "--embedding-model", "none")
    try:
        reply = httpx.post(
            f"{server.base_url}/embeddings", json={"model": MODEL, "input": "x"}, timeout=30
        )
        assert reply.status_code == 501 and reply.json()["error"]["code"] == "unsupported"
        listed = httpx.get(f"{server.base_url}/models", timeout=30).json()
        assert [m["id"] for m in listed["data"]] == ["smollm2-135m"]  # no embedding model
        with openai_client(server.base_url) as sdk:  # search is lexical only, and works
            store = sdk.vector_stores.create(name="lexical")
            sdk.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=("a.txt", b"herons and egrets")
            )
            hits = sdk.vector_stores.search(store.id, query="egrets").data
            assert [h.filename for h in hits] == ["a.txt"]
            assert not sdk.vector_stores.search(store.id, query="doctor").data
    finally:
        server.stop()


def test_an_unreadable_model_file_stops_the_server_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    server = start_server(
        tmp_path, "--threads", "1", "--embedding-model", str(bad), wait_ready=False
    )
    assert server.process.wait(timeout=120) != 0
    assert "--embedding-model" in server.log()
