"""Real stores for tests: a SQLite file in tmp, or a fresh schema on the local PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.support.server import Server, start_server

PG_URL = os.environ.get("RESPOND_TEST_PG", "postgresql://root@127.0.0.1:5432/test")


def pg_address() -> tuple[str, int]:
    parts = urlsplit(PG_URL)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def new_schema_url() -> tuple[str, str]:
    """(store URL, schema): a schema of its own, so test runs never collide."""
    schema = f"test_{secrets.token_hex(6)}"
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}schema={schema}", schema


async def drop_schema(schema: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


# Both stores, as a module fixture's params: for the e2e tests whose subject is the store
# (load, replicas, restarts, faults). Any other e2e test runs on SQLite alone: the store
# contract (tests/unit/test_store.py) holds both stores to the same behaviour at SQL speed.
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.pg)]


@contextmanager
def served_on(store: str, tmp: Path, *args: str) -> Iterator[Server]:
    """A server on `store`: "sqlite" (its file in `tmp`) or "postgres" (a schema of its own,
    dropped after). Stopped at the end, pass or fail."""
    if store == "sqlite":
        server = start_server(tmp, *args)
        try:
            yield server
        finally:
            server.stop()
        return
    url, schema = new_schema_url()
    try:
        server = start_server(tmp, *args, "--store", url)
        try:
            yield server
        finally:
            server.stop()
    finally:
        asyncio.run(drop_schema(schema))
