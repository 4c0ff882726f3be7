"""The ContainerService without a sandbox run: its refusals (expired, held by another
replica, missing), and the sweep that deletes expired containers and the folders of gone
ones, over a real SQLite store."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from respond.containers import ContainerService, Limits, Sandbox
from respond.protocol.errors import APIError
from respond.store import ListQuery
from respond.store.containers import ContainerStore
from respond.store.files import FileStore
from respond.store.sqlite import SQLiteStore

LIMITS = Limits(timeout=5, cpu_seconds=5, memory_mb=256, disk_mb=8, processes=8)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ContainerService]:
    sql = SQLiteStore(tmp_path / "s.sqlite3", ttl_seconds=100)
    await sql.open()
    state = tmp_path / "containers"
    sandbox = Sandbox("namespaces", sys.executable, (), None, LIMITS, state / ".root")
    yield ContainerService(
        ContainerStore(sql), FileStore(sql), sandbox, state, max_file_bytes=1 << 20
    )
    await sql.close()


def _age(folder: Path) -> None:
    """The folder as an old one (the sweep leaves folders of containers being made)."""
    old = time.time() - 3600
    os.utime(folder, (old, old))


async def test_the_replica_is_named_once_per_data_dir(service: ContainerService) -> None:
    again = ContainerService(
        service.store, service.files, service.sandbox, service.state, max_file_bytes=1
    )
    assert again.replica == service.replica and "-" in service.replica


async def test_an_expired_container_is_refused_then_swept_with_its_folder(
    service: ContainerService,
) -> None:
    made = await service.create("t", "box", minutes=1)
    await service.add_file("t", made["id"], "a.txt", b"a")
    folder = service.folder(made["id"])
    assert (folder / "a.txt").read_bytes() == b"a"
    await service.store.touch("t", made["id"], int(time.time()) - 120)  # idle for 2 minutes
    with pytest.raises(APIError) as raised:
        await service.held("t", made["id"], "tools[0].container")
    assert (raised.value.status, raised.value.code) == (400, "container_expired")
    assert raised.value.param == "tools[0].container"
    _age(folder)
    assert await service.sweep() >= 1
    assert await service.get("t", made["id"]) is None and not folder.exists()


async def test_another_replicas_container_is_a_409_naming_it(service: ContainerService) -> None:
    other = {
        "id": "cntr_far",
        "object": "container",
        "created_at": int(time.time()),
        "name": "far",
        "expires_after": {"anchor": "last_active_at", "minutes": 20},
        "last_active_at": int(time.time()),
    }
    await service.store.create("t", "elsewhere-1234", other)
    with pytest.raises(APIError) as raised:
        await service.run("t", "cntr_far", "print(1)")
    assert raised.value.status == 409 and "'elsewhere-1234'" in raised.value.message
    with pytest.raises(APIError) as missing:
        await service.held("other-tenant", "cntr_far")
    assert missing.value.status == 404
    assert await service.delete("t", "cntr_far")  # from any replica


async def test_the_sweep_removes_folders_of_gone_containers_but_not_new_ones(
    service: ContainerService,
) -> None:
    kept = await service.create("t", "kept")
    gone = await service.create("t", "gone")
    await service.store.delete("t", gone["id"])  # as another replica deletes it
    young = service.state / "cntr_being_made"
    young.mkdir()
    for made in (kept, gone):
        _age(service.folder(made["id"]))
    await service.sweep()
    assert service.folder(kept["id"]).exists() and young.exists()
    assert not service.folder(gone["id"]).exists()


async def test_a_file_name_that_is_not_a_file_path_is_a_4xx(service: ContainerService) -> None:
    made = await service.create("t", "box")
    (service.folder(made["id"]) / "made-by-code").mkdir()
    for name, status in (("..", 400), (".", 400), ("made-by-code", 409)):
        with pytest.raises(APIError) as raised:
            await service.add_file("t", made["id"], name, b"x")
        assert (raised.value.status, raised.value.param) == (status, "file")
    assert await service.store.files(made["id"]) == []


async def test_a_container_made_with_a_file_it_cannot_hold_is_not_made(
    service: ContainerService,
) -> None:
    file = {
        "id": "file_dots",
        "object": "file",
        "bytes": 1,
        "created_at": 1,
        "filename": "..",
        "purpose": "user_data",
        "status": "processed",
    }
    await service.files.create_file("t", file, b"x")
    with pytest.raises(APIError) as raised:
        await service.create("t", "box", file_ids=["file_dots"])
    assert (raised.value.status, raised.value.param) == (400, "file_ids")
    page = await service.list_containers("t", None, ListQuery())
    assert page.data == [] and not list(service.state.glob("cntr_*"))


async def test_files_sent_to_a_container_fit_what_a_call_copies_in(
    service: ContainerService,
) -> None:
    """Uploads past the disk limit (8 MiB here) are refused: a container holding more could
    not run code until some were deleted. Replacing a file counts it once."""
    made = await service.create("t", "box")
    await service.add_file("t", made["id"], "a", b"x" * (5 << 20))
    await service.add_file("t", made["id"], "a", b"x" * (6 << 20))
    with pytest.raises(APIError) as raised:
        await service.add_file("t", made["id"], "b", b"x" * (3 << 20))
    assert (raised.value.status, raised.value.code) == (400, "container_full")
    assert raised.value.param == "file"
