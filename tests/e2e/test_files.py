"""The Files API and vector stores through the official SDK.

On SQLite (the store contract, tests/unit/test_store.py, holds PostgreSQL to the same
behaviour; tests/e2e/test_store_load.py uploads into vector stores on both): upload, list
with pagination, content, delete; vector stores, indexing in the background, lexical search
with attribute filters, batches; and bad input answered with the error envelope naming
`param`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.clients import openai_client
from tests.support.pdfs import pdf
from tests.support.server import Server, start_server

MAX_FILE_MB = 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("files"))
    srv = start_server(tmp, "--threads", "1", "--max-file-mb", str(MAX_FILE_MB))
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server.base_url) as sdk:
        yield sdk


def error_of(exc: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = exc.value.body
    assert isinstance(body, dict), body
    error: dict[str, Any] = body.get("error", body)
    assert error["message"] and error["type"] and error["code"], error
    return error


# ---------------------------------------------------------------- files


def test_upload_list_retrieve_content_delete(client: openai.OpenAI) -> None:
    data = b"# Notes\n\nThe heron waits by the river.\n"
    made = client.files.create(file=("notes.md", data), purpose="assistants")
    assert made.object == "file" and made.filename == "notes.md"
    assert made.bytes == len(data) and made.purpose == "assistants"
    assert client.files.retrieve(made.id).model_dump() == made.model_dump()
    assert client.files.content(made.id).read() == data

    others = [
        client.files.create(file=(f"u{i}.txt", b"x" * i), purpose="user_data") for i in range(3)
    ]
    listed = client.files.list(purpose="user_data", limit=2)
    assert len(listed.data) == 2 and listed.has_more
    walked = [f.id for f in client.files.list(purpose="user_data", limit=2)]  # every page
    assert set(walked) >= {f.id for f in others} and made.id not in walked
    assert len(walked) == len(set(walked))
    oldest_first = [f.id for f in client.files.list(purpose="user_data", order="asc")]
    assert oldest_first == walked[::-1]

    gone = client.files.delete(made.id)
    assert gone.deleted and gone.id == made.id
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client.files.content(made.id)


def test_a_file_over_the_limit_is_413(client: openai.OpenAI) -> None:
    big = b"a" * (MAX_FILE_MB * 1024 * 1024 + 1)
    with pytest.raises(openai.APIStatusError) as exc:
        client.files.create(file=("big.txt", big), purpose="assistants")
    assert exc.value.status_code == 413
    assert error_of(exc)["param"] == "file"


def test_bad_uploads_name_the_param(server: Server, client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        client.files.create(file=("a.txt", b"a"), purpose="wrong")  # type: ignore[arg-type]
    assert error_of(exc)["param"] == "purpose"
    reply = httpx.post(f"{server.base_url}/files", data={"purpose": "assistants"}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "file"
    reply = httpx.post(f"{server.base_url}/files", files={"file": ("a.txt", b"a")}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "purpose"
    reply = httpx.get(f"{server.base_url}/files", params={"after": "file_nope"}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "after"


# ---------------------------------------------------------------- vector stores


DOCS = {
    "heron.md": b"# Herons\n\nThe grey heron hunts fish in shallow water at dawn.\n",
    "kettle.html": b"<html><head><style>p{}</style><script>var owl=1</script></head>"
    b"<body><h1>Kettles</h1><p>A kettle boils water for tea.</p></body></html>",
    "config.json": b'{"service": "lighthouse", "port": 8080}',
    "comet.pdf": pdf([["A comet has a tail of ice and dust.", "Comets orbit the sun."]]),
    "sorter.py": b"def quicksort(items):\n    return sorted(items)  # a placeholder\n",
}


def test_upload_and_poll_then_search(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="library", metadata={"team": "a"})
    assert store.object == "vector_store" and store.status == "completed"
    indexed = {}
    for i, (name, data) in enumerate(DOCS.items()):
        indexed[name] = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id,
            file=(name, data),
            attributes={"kind": name.rsplit(".", 1)[1], "rank": i},
        )
        assert indexed[name].status == "completed", indexed[name].last_error
        assert indexed[name].usage_bytes > 0

    store = client.vector_stores.retrieve(store.id)
    assert store.file_counts.completed == len(DOCS) and store.file_counts.total == len(DOCS)
    assert store.status == "completed" and store.usage_bytes > 0

    for query, expected in [
        ("grey heron fishing", "heron.md"),
        ("boil water for tea", "kettle.html"),
        ("lighthouse service", "config.json"),
        ("comet tail of ice", "comet.pdf"),
        ("quicksort", "sorter.py"),
    ]:
        page = client.vector_stores.search(store.id, query=query)
        assert page.data, query
        assert page.data[0].filename == expected, (query, [d.filename for d in page.data])
        assert 0 < page.data[0].score <= 1

    def text_of(name: str) -> str:
        parts = client.vector_stores.files.content(
            file_id=indexed[name].id, vector_store_id=store.id
        )
        return "\n".join(part.text or "" for part in parts)

    assert "tail of ice and dust" in text_of("comet.pdf")
    # A page's text is its body's, without scripts and styles.
    assert text_of("kettle.html") == "Kettles\nA kettle boils water for tea."


def test_hybrid_search_finds_meaning_without_shared_words(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="hybrid")
    for name, text in [
        ("clinic.txt", b"The physician prescribed medication for the infection."),
        ("harbor.txt", b"The harbor is full of sailboats and fishing boats."),
        ("bakery.txt", b"Fresh bread and pastries are sold every morning."),
    ]:
        client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=(name, text))
    # No word of the query is in any file: only the embedding model can tell.
    page = client.vector_stores.search(store.id, query="doctor gave medicine")
    assert page.data[0].filename == "clinic.txt", [(d.filename, d.score) for d in page.data]
    # Both rankings agree on this one: fused, it is first with the best possible score.
    page = client.vector_stores.search(store.id, query="sailboats in the harbor")
    assert page.data[0].filename == "harbor.txt" and page.data[0].score == 1.0


def test_filters_and_detach(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="filtered")
    for name, year, lang in [("a.txt", 2020, "en"), ("b.txt", 2023, "en"), ("c.txt", 2024, "fr")]:
        client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id,
            file=(name, b"the annual report on river levels"),
            attributes={"year": year, "lang": lang},
        )

    def found(filters: Any) -> set[str]:
        page = client.vector_stores.search(store.id, query="river report", filters=filters)
        return {hit.filename for hit in page.data}

    assert found(None) == {"a.txt", "b.txt", "c.txt"}
    assert found({"type": "eq", "key": "lang", "value": "en"}) == {"a.txt", "b.txt"}
    assert found({"type": "gte", "key": "year", "value": 2023}) == {"b.txt", "c.txt"}
    compound = {
        "type": "and",
        "filters": [
            {"type": "eq", "key": "lang", "value": "en"},
            {"type": "gt", "key": "year", "value": 2021},
        ],
    }
    assert found(compound) == {"b.txt"}
    either = {
        "type": "or",
        "filters": [
            {"type": "in", "key": "lang", "value": ["fr"]},
            {"type": "lt", "key": "year", "value": 2021},
        ],
    }
    assert found(either) == {"a.txt", "c.txt"}
    assert found({"type": "ne", "key": "missing", "value": "x"}) == {"a.txt", "b.txt", "c.txt"}

    listed = client.vector_stores.files.list(vector_store_id=store.id)
    first = next(f for f in listed if True)
    client.vector_stores.files.delete(file_id=first.id, vector_store_id=store.id)
    assert len(found(None)) == 2
    # Deleting the file itself takes it out of every store too.
    second = next(f for f in client.vector_stores.files.list(vector_store_id=store.id))
    client.files.delete(second.id)
    assert len(found(None)) == 1
    assert client.vector_stores.retrieve(store.id).file_counts.total == 1


def test_batches_and_unsupported_files(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="batch")
    good = client.files.create(file=("ok.txt", b"plain words about glaciers"), purpose="assistants")
    image = client.files.create(
        file=("pic.png", b"\x89PNG\r\n\x1a\n\x00\x00"), purpose="assistants"
    )
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id, file_ids=[good.id, image.id]
    )
    assert batch.status == "completed"
    assert batch.file_counts.completed == 1 and batch.file_counts.failed == 1
    failed = client.vector_stores.files.retrieve(file_id=image.id, vector_store_id=store.id)
    assert failed.status == "failed" and failed.last_error is not None
    assert failed.last_error.code == "unsupported_file" and ".png" in failed.last_error.message
    files = client.vector_stores.file_batches.list_files(
        batch_id=batch.id, vector_store_id=store.id, filter="completed"
    )
    assert [f.id for f in files] == [good.id]
    hits = client.vector_stores.search(store.id, query="glaciers").data
    assert [h.file_id for h in hits] == [good.id]


def test_static_chunking(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="chunks")
    words = " ".join(f"w{i}" for i in range(450))
    entry = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id,
        file=("long.txt", words.encode()),
        chunking_strategy={
            "type": "static",
            "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50},
        },
    )
    assert entry.status == "completed"
    parts = [
        p.text or ""
        for p in client.vector_stores.files.content(file_id=entry.id, vector_store_id=store.id)
    ]
    # 450 words, windows of 200 stepping by 150: w0-w199, w150-w349, w300-w449.
    assert [(p.split()[0], p.split()[-1]) for p in parts] == [
        ("w0", "w199"),
        ("w150", "w349"),
        ("w300", "w449"),
    ]


def test_bad_vector_store_requests(server: Server, client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="errors")
    exc: pytest.ExceptionInfo[openai.APIStatusError]  # a 404 first, then 400s
    with pytest.raises(openai.NotFoundError) as exc:
        client.vector_stores.search("vs_nope", query="x")
    assert error_of(exc)["code"] == "vector_store_not_found"
    with pytest.raises(openai.NotFoundError) as exc:
        client.vector_stores.files.create(vector_store_id=store.id, file_id="file_nope")
    assert error_of(exc)["param"] == "file_id"
    bad = {"type": "in", "key": "lang", "value": "en"}
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.search(store.id, query="x", filters=bad)  # type: ignore[arg-type]
    assert error_of(exc)["param"] == "filters.value"
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.search(store.id, query="x", filters={"type": "near", "key": "a"})  # type: ignore[arg-type]
    assert error_of(exc)["param"].startswith("filters")
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(
            chunking_strategy={
                "type": "static",
                "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 150},
            }
        )
    assert error_of(exc)["param"] == "chunking_strategy.static.chunk_overlap_tokens"
    reply = httpx.post(f"{server.base_url}/vector_stores/{store.id}/search", json={}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "query"


def test_vector_store_lifecycle(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(
        name="life", expires_after={"anchor": "last_active_at", "days": 2}
    )
    assert store.last_active_at is not None
    assert store.expires_at == store.last_active_at + 2 * 86400
    renamed = client.vector_stores.update(store.id, name="renamed", metadata={"k": "v"})
    assert renamed.name == "renamed" and renamed.metadata == {"k": "v"}
    assert store.id in [s.id for s in client.vector_stores.list()]
    assert client.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(store.id)
