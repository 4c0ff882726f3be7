"""Where respond keeps state: SQLite in the data directory, or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from respond.store.base import ListQuery, Page, Store, StoredResponse

__all__ = ["ListQuery", "Page", "Store", "StoredResponse", "make_store"]


def make_store(url: str | None, data_dir: Path, *, ttl_seconds: int) -> Store:
    """The store a `--store` value names: None means SQLite in `data_dir`.

    `ttl_seconds` has no default here: Settings.store_ttl_seconds is the one default.
    """
    if url is None or url.startswith("sqlite:"):
        from respond.store.sqlite import SQLiteStore

        path = Path(url.removeprefix("sqlite:")) if url else data_dir / "respond.sqlite3"
        return SQLiteStore(path, ttl_seconds=ttl_seconds)
    if url.startswith(("postgresql://", "postgres://")):
        from respond.store.postgres import PostgresStore

        return PostgresStore(url, ttl_seconds=ttl_seconds)
    raise ValueError(f"unsupported --store {url!r}: use postgresql://... (or leave it out)")
