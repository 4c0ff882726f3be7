"""Code interpreter containers: a folder of files on this replica, code run against it.

`ContainerService` is what the Containers API (api/containers.py) and the
code_interpreter tool (responses/hosted/code_interpreter.py) share; it exists when the
server runs with `--code-interpreter` and a SQL store. A container's files are in
`<data dir>/containers/<id>/` on the replica that made it (its rows in the store name that
replica): only it runs code in the container or serves its files' bytes; another replica
answers 409 naming it. Calls in one container run one at a time; each is a fresh sandboxed
process (`_sandbox.py`) that sees the folder as /mnt/data.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import mimetypes
import os
import secrets
import shutil
import socket
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from respond._ids import new_id
from respond.containers._sandbox import Limits, Outcome, Sandbox, SandboxError, SandboxMode
from respond.protocol.containers import DEFAULT_MINUTES
from respond.protocol.errors import APIError
from respond.store.base import JSON, ListQuery, Page
from respond.store.containers import ContainerStore
from respond.store.files import FileStore

__all__ = [
    "DATA",
    "ContainerService",
    "Limits",
    "Outcome",
    "Ran",
    "Sandbox",
    "SandboxError",
    "SandboxMode",
    "replica_id",
]

log = logging.getLogger("respond.containers")

DATA = "/mnt/data"  # where the code sees a container's files
SWEEP_SECONDS = 60.0
YOUNG_SECONDS = 300  # a folder this new may belong to a container being created now
IMAGES = {".png", ".jpg", ".jpeg", ".gif", ".webp"}
MAX_IMAGE_BYTES = 4 * 1024 * 1024  # larger images are files, not image outputs

Snapshot = dict[str, tuple[int, int]]  # relative path -> (bytes, mtime in ns)


@dataclass(frozen=True)
class Ran:
    """A call's outcome, and the files it wrote (new or changed), as container files."""

    outcome: Outcome
    written: list[JSON] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # data: URLs of the images it wrote


def replica_id(state: Path) -> str:
    """This replica's name in the store: made once per data dir (host name and a random
    part), so a restarted replica still holds its containers."""
    path = state / "replica"
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    state.mkdir(parents=True, exist_ok=True)
    name = f"{socket.gethostname()}-{secrets.token_hex(4)}"
    path.write_text(name + "\n")
    return name


class ContainerService:
    def __init__(
        self,
        store: ContainerStore,
        files: FileStore,
        sandbox: Sandbox,
        state: Path,
        *,
        max_file_bytes: int,
    ) -> None:
        self.store = store
        self.files = files
        self.sandbox = sandbox
        self.state = state
        self.replica = replica_id(state)
        self.max_file_bytes = max_file_bytes
        # One call (or file change) at a time per container; a lock lives while it is used.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # ------------------------------------------------------------ containers

    async def create(
        self,
        tenant: str | None,
        name: str,
        *,
        minutes: int = DEFAULT_MINUTES,
        file_ids: list[str] | None = None,
        container_id: str | None = None,
        param: str = "file_ids",
    ) -> JSON:
        """A new container on this replica, holding copies of the Files API's `file_ids`
        (a missing one is a 404 naming `param`)."""
        copies = []
        for file_id in file_ids or []:
            found = await self.files.file_content(tenant, file_id)
            if found is None:
                raise APIError(
                    404,
                    f"File with id '{file_id[:64]}' not found.",
                    param=param,
                    code="file_not_found",
                )
            _check_name(found[0]["filename"], param)
            copies.append(found)
        now = int(time.time())
        container: JSON = {
            "id": container_id or new_id("cntr"),
            "object": "container",
            "created_at": now,
            "name": name,
            "expires_after": {"anchor": "last_active_at", "minutes": minutes},
            "last_active_at": now,
        }
        await self.store.create(tenant, self.replica, container)
        folder = self.folder(container["id"])
        await asyncio.to_thread(folder.mkdir, mode=0o700, parents=True, exist_ok=True)
        for file, content in copies:
            await self._put(tenant, container["id"], file["filename"], content, "user")
        return {**container, "status": "running"}

    async def get(self, tenant: str | None, container_id: str) -> JSON | None:
        held = await self.store.get(tenant, container_id)
        return None if held is None else held[0]

    async def list_containers(self, tenant: str | None, name: str | None, query: ListQuery) -> Page:
        return await self.store.list_containers(tenant, name, query)

    async def held(self, tenant: str | None, container_id: str, param: str | None = None) -> JSON:
        """The container, running, on this replica; else the error that says why not."""
        held = await self.store.get(tenant, container_id)
        if held is None:
            raise missing(container_id, param)
        container, replica = held
        if container["status"] == "expired":
            raise APIError(
                400,
                f"Container '{container_id}' has expired (it was idle for "
                f"{container['expires_after']['minutes']} minutes); create a new one.",
                param=param,
                code="container_expired",
            )
        if replica != self.replica:
            raise APIError(
                409,
                f"Container '{container_id}' is held by replica '{replica}', not this one "
                f"('{self.replica}'): its files are on that replica's disk. Send requests "
                "that use it to that replica (docs/deploy.md#code-interpreter-containers).",
                param=param,
                code="container_on_other_replica",
            )
        return container

    async def delete(self, tenant: str | None, container_id: str) -> bool:
        """Delete it from any replica; its holder removes the folder (now, or at its sweep)."""
        held = await self.store.get(tenant, container_id)
        if held is None or not await self.store.delete(tenant, container_id):
            return False
        if held[1] == self.replica:
            async with self._lock(container_id):
                await asyncio.to_thread(shutil.rmtree, self.folder(container_id), True)
        return True

    def folder(self, container_id: str) -> Path:
        return self.state / container_id

    def _lock(self, container_id: str) -> asyncio.Lock:
        lock = self._locks.get(container_id)
        if lock is None:
            lock = self._locks[container_id] = asyncio.Lock()
        return lock

    # ------------------------------------------------------------ files

    async def add_file(
        self, tenant: str | None, container_id: str, filename: str, content: bytes
    ) -> JSON:
        await self.held(tenant, container_id)
        async with self._lock(container_id):
            file = await self._put(tenant, container_id, filename, content, "user")
        await self.store.touch(tenant, container_id, int(time.time()))
        return file

    async def _put(
        self, tenant: str | None, container_id: str, filename: str, content: bytes, source: str
    ) -> JSON:
        path = self.folder(container_id) / filename
        _check_name(filename, "file")
        try:
            await asyncio.to_thread(path.write_bytes, content)
        except IsADirectoryError:
            raise APIError(
                409,
                f"The container has a folder at {DATA}/{filename}; name the file otherwise.",
                param="file",
                code="path_is_a_folder",
            ) from None
        file: JSON = {
            "id": new_id("cfile"),
            "object": "container.file",
            "container_id": container_id,
            "created_at": int(time.time()),
            "bytes": len(content),
            "path": f"{DATA}/{filename}",
            "source": source,
        }
        await self.store.put_file(tenant, file)
        return file

    async def file_content(
        self, tenant: str | None, container_id: str, file_id: str
    ) -> tuple[JSON, bytes]:
        await self.held(tenant, container_id)
        file = await self.store.get_file(tenant, container_id, file_id)
        if file is None:
            raise missing_file(file_id)
        try:
            content = await asyncio.to_thread(self._path(file).read_bytes)
        except OSError:
            raise missing_file(file_id) from None  # removed by a call this moment
        return file, content

    async def delete_file(self, tenant: str | None, container_id: str, file_id: str) -> bool:
        await self.held(tenant, container_id)
        async with self._lock(container_id):
            file = await self.store.get_file(tenant, container_id, file_id)
            if file is None or not await self.store.delete_file(tenant, container_id, file_id):
                return False
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(self._path(file).unlink)
        return True

    def _path(self, file: JSON) -> Path:
        return self.folder(file["container_id"]) / str(file["path"]).removeprefix(DATA + "/")

    # ------------------------------------------------------------ running code

    async def run(self, tenant: str | None, container_id: str, code: str) -> Ran:
        """Run `code` in the container (which must be held here); the files it wrote
        become its container files (source "assistant"), those it removed go."""
        await self.held(tenant, container_id)
        folder = self.folder(container_id)
        async with self._lock(container_id):
            await self.store.touch(tenant, container_id, int(time.time()))
            before = await asyncio.to_thread(_snapshot, folder)
            outcome = await self.sandbox.run(code, folder)
            after = await asyncio.to_thread(_snapshot, folder)
            ran = await self._sync(tenant, container_id, outcome, before, after)
        await self.store.touch(tenant, container_id, int(time.time()))
        return ran

    async def _sync(
        self,
        tenant: str | None,
        container_id: str,
        outcome: Outcome,
        before: Snapshot,
        after: Snapshot,
    ) -> Ran:
        known = {str(f["path"]): f for f in await self.store.files(container_id)}
        now = int(time.time())
        written: list[JSON] = []
        images: list[str] = []
        for relative, (size, _) in sorted(after.items()):
            path = f"{DATA}/{relative}"
            if before.get(relative) == after[relative] and path in known:
                continue
            old = known.get(path)
            written.append(
                {
                    "id": old["id"] if old else new_id("cfile"),
                    "object": "container.file",
                    "container_id": container_id,
                    "created_at": old["created_at"] if old else now,
                    "bytes": size,
                    "path": path,
                    "source": "assistant",
                }
            )
            if Path(relative).suffix.lower() in IMAGES and size <= MAX_IMAGE_BYTES:
                folder = self.folder(container_id)
                images.append(await asyncio.to_thread(_data_url, folder, relative))
        gone = [f["id"] for path, f in known.items() if path.removeprefix(DATA + "/") not in after]
        await self.store.sync_files(tenant, container_id, written, gone)
        return Ran(outcome, written, images)

    # ------------------------------------------------------------ upkeep

    async def sweep_forever(self, every: float = SWEEP_SECONDS) -> None:
        """Delete expired containers (every replica's rows) and this replica's folders of
        containers that are gone, now and every `every` seconds."""
        while True:
            try:
                purged = await self.sweep()
                if purged:
                    log.info("removed %d expired or deleted containers", purged)
            except Exception:
                log.exception("sweeping containers failed")
            await asyncio.sleep(every)

    async def sweep(self) -> int:
        purged = await self.store.purge_expired()
        live = await self.store.live_ids(self.replica)
        removed = await asyncio.to_thread(_remove_stale, self.state, live)
        return max(purged, removed)


def _check_name(filename: str, param: str) -> None:
    if filename in (".", ".."):
        raise APIError(400, f"A container file may not be named {filename!r}.", param=param)


def missing(container_id: str, param: str | None = None) -> APIError:
    return APIError(
        404,
        f"Container with id '{container_id[:64]}' not found.",
        param=param,
        code="container_not_found",
    )


def missing_file(file_id: str) -> APIError:
    return APIError(
        404, f"Container file with id '{file_id[:64]}' not found.", code="file_not_found"
    )


def _snapshot(folder: Path) -> Snapshot:
    found: Snapshot = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            info = path.lstat()
            found[path.relative_to(folder).as_posix()] = (info.st_size, info.st_mtime_ns)
    return found


def _data_url(folder: Path, relative: str) -> str:
    media = mimetypes.guess_type(relative)[0] or "image/png"
    encoded = base64.b64encode((folder / relative).read_bytes()).decode()
    return f"data:{media};base64,{encoded}"


def _remove_stale(state: Path, live: set[str]) -> int:
    """Remove the folders of this replica's containers that are no longer in the store."""
    removed = 0
    for entry in state.glob("cntr_*"):
        young = time.time() - entry.stat().st_mtime < YOUNG_SECONDS
        if entry.name not in live and not young:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed
