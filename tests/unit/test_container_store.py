"""Containers and their files in the store, against both databases: a real SQLite file and
the local PostgreSQL. Expiry, the purge, tenants, pagination with the name filter, and
concurrent writers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from respond.store import ListQuery
from respond.store.containers import ContainerStore
from respond.store.postgres import PostgresStore
from respond.store.sql import SQLStore
from respond.store.sqlite import SQLiteStore
from tests.support.stores import drop_schema, new_schema_url

NOW = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
async def sql(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[SQLStore]:
    if request.param == "sqlite":
        store: SQLStore = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=100, clock=clock)
        await store.open()
        yield store
        await store.close()
        return
    url, schema = new_schema_url()
    store = PostgresStore(url, ttl_seconds=100, clock=clock)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
        await drop_schema(schema)


def container(
    container_id: str, name: str = "box", minutes: int = 20, at: int = NOW
) -> dict[str, Any]:
    return {
        "id": container_id,
        "object": "container",
        "created_at": at,
        "name": name,
        "expires_after": {"anchor": "last_active_at", "minutes": minutes},
        "last_active_at": at,
    }


def file(file_id: str, container_id: str, path: str, at: int = NOW) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "container.file",
        "container_id": container_id,
        "created_at": at,
        "bytes": 1,
        "path": path,
        "source": "user",
    }


async def test_a_container_runs_until_idle_for_its_minutes_then_is_purged(
    sql: SQLStore, clock: Clock
) -> None:
    store = ContainerStore(sql)
    await store.create("t", "replica-a", container("cntr_1", minutes=1))
    await store.put_file("t", file("cfile_1", "cntr_1", "/mnt/data/a"))
    held = await store.get("t", "cntr_1")
    assert held is not None and held[0]["status"] == "running" and held[1] == "replica-a"
    clock.now += 50
    assert await store.touch("t", "cntr_1", int(clock.now))  # used: a minute from now again
    clock.now += 50
    assert (await store.get("t", "cntr_1"))[0]["status"] == "running"  # type: ignore[index]
    clock.now += 11
    assert (await store.get("t", "cntr_1"))[0]["status"] == "expired"  # type: ignore[index]
    assert not await store.touch("t", "cntr_1", int(clock.now))  # an expired one stays so
    assert await store.purge_expired() == 1
    assert await store.get("t", "cntr_1") is None
    assert await store.files("cntr_1") == []


async def test_tenants_pages_and_the_name_filter(sql: SQLStore) -> None:
    store = ContainerStore(sql)
    for n, name in enumerate(["a", "b", "a", "a"]):
        await store.create("t", "r", container(f"cntr_{n}", name=name, at=NOW + n))
    await store.create("other", "r", container("cntr_x", name="a"))
    assert await store.get("other", "cntr_0") is None
    first = await store.list_containers("t", "a", ListQuery(limit=2))
    assert [c["id"] for c in first.data] == ["cntr_3", "cntr_2"] and first.has_more
    rest = await store.list_containers("t", "a", ListQuery(limit=2, after="cntr_2"))
    assert [c["id"] for c in rest.data] == ["cntr_0"] and not rest.has_more
    assert await store.live_ids("r") == {"cntr_0", "cntr_1", "cntr_2", "cntr_3", "cntr_x"}
    assert not await store.delete("other", "cntr_0")
    assert await store.delete("t", "cntr_0")


async def test_a_file_at_a_path_is_replaced_and_a_sync_is_whole(sql: SQLStore) -> None:
    store = ContainerStore(sql)
    await store.create("t", "r", container("cntr_1"))
    await store.put_file("t", file("cfile_1", "cntr_1", "/mnt/data/a"))
    await store.put_file("t", file("cfile_2", "cntr_1", "/mnt/data/a"))  # the same path again
    assert [f["id"] for f in await store.files("cntr_1")] == ["cfile_2"]
    await store.sync_files("t", "cntr_1", [file("cfile_3", "cntr_1", "/mnt/data/b")], ["cfile_2"])
    assert [f["id"] for f in await store.files("cntr_1")] == ["cfile_3"]
    assert await store.get_file("other", "cntr_1", "cfile_3") is None
    assert await store.delete_file("t", "cntr_1", "cfile_3")


async def test_concurrent_writers_to_one_container_all_land(sql: SQLStore) -> None:
    store = ContainerStore(sql)
    await store.create("t", "r", container("cntr_1"))

    async def put(n: int) -> None:
        await store.sync_files("t", "cntr_1", [file(f"cfile_{n}", "cntr_1", f"/mnt/data/{n}")], [])
        await store.touch("t", "cntr_1", NOW + n)

    await asyncio.gather(*(put(n) for n in range(20)))
    page = await store.list_files("t", "cntr_1", ListQuery(limit=100))
    assert len(page.data) == 20 and len({f["path"] for f in page.data}) == 20
