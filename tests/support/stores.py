"""Real stores for tests: a SQLite file in tmp, or a fresh schema on the local PostgreSQL."""

from __future__ import annotations

import os
import secrets
from urllib.parse import urlsplit

import asyncpg

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
