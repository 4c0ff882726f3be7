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
import socket
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from respond._ids import new_id
from respond.containers import _tree
from respond.containers._sandbox import (
    DATA,
    MAX_DEPTH,
    MAX_ENTRIES,
    Dropped,
    Limits,
    Outcome,
    Sandbox,
    SandboxError,
    SandboxMode,
)
from respond.protocol.containers import DEFAULT_MINUTES
from respond.protocol.errors import APIError
from respond.store.base import JSON, ListQuery, Page
from respond.store.containers import ContainerStore
from respond.store.files import FileStore

__all__ = [
    "DATA",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_IMAGES",
    "MAX_IMAGES_BYTES",
    "ContainerService",
    "Dropped",
    "Limits",
    "Outcome",
    "Ran",
    "Sandbox",
    "SandboxError",
    "SandboxMode",
    "replica_id",
]

log = logging.getLogger("respond.containers")

SWEEP_SECONDS = 60.0
YOUNG_SECONDS = 300  # a folder this new may belong to a container being created now
SCRATCH = ".work"  # limits-only: a call's own copy of the container's folder (_boot.py)
IMAGES = {".png", ".jpg", ".jpeg", ".gif", ".webp"}
# Images a call wrote are shown (data: URLs in its outputs, stored with the response) up to
# these; the rest stay container files. Without a total, one call's images could make a
# response of hundreds of MB.
MAX_IMAGE_BYTES = 4 * 1024 * 1024  # larger images are files, not image outputs
MAX_IMAGES = 10
MAX_IMAGES_BYTES = 8 * 1024 * 1024

Snapshot = dict[str, tuple[int, int]]  # relative path -> (bytes, mtime in ns)


@dataclass(frozen=True)
class Ran:
    """A call's outcome, and the files it wrote (new or changed), as container files."""

    outcome: Outcome
    written: list[JSON] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # data: URLs of the images it wrote
    images_not_shown: int = 0  # beyond MAX_IMAGES or MAX_IMAGES_BYTES


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
        self._check_room([], [(f["filename"], len(c)) for f, c in copies], param)
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
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(_remove, self.state, container_id)
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
            known = await self.store.files(container_id)
            self._check_room(known, [(filename, len(content))], "file")
            file = await self._put(tenant, container_id, filename, content, "user")
        await self.store.touch(tenant, container_id, int(time.time()))
        return file

    async def _put(
        self, tenant: str | None, container_id: str, filename: str, content: bytes, source: str
    ) -> JSON:
        _check_name(filename, "file")
        try:
            await asyncio.to_thread(_tree.write, self.folder(container_id), filename, content)
        except IsADirectoryError:
            raise APIError(
                409,
                f"The container has a folder at {DATA}/{filename}; name the file otherwise.",
                param="file",
                code="path_is_a_folder",
            ) from None
        except FileNotFoundError:  # a name that is not one file's (_tree.parent)
            raise APIError(400, f"{filename[:64]!r} is not a file name.", param="file") from None
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

    def _check_room(self, known: list[JSON], adding: list[tuple[str, int]], param: str) -> None:
        """Files sent to a container fit what a call copies in: one that did not could not
        run code until some were deleted (docs/tools.md#what-a-call-keeps)."""
        replaced = {f"{DATA}/{name}" for name, _ in adding}
        kept = [int(f["bytes"]) for f in known if f["path"] not in replaced]
        sizes = kept + [size for _, size in adding]
        disk = self.sandbox.limits.disk_mb
        if len(sizes) > MAX_ENTRIES or sum(map(_tree.cost, sizes)) > disk * 2**20:
            raise APIError(
                400,
                f"A container holds at most {MAX_ENTRIES} files and {disk} MiB in all (the "
                "sandbox's disk limit); this would be more. Delete some of its files first.",
                param=param,
                code="container_full",
            )

    async def file_content(
        self, tenant: str | None, container_id: str, file_id: str
    ) -> tuple[JSON, bytes]:
        await self.held(tenant, container_id)
        file = await self.store.get_file(tenant, container_id, file_id)
        if file is None:
            raise missing_file(file_id)
        try:
            content = await asyncio.to_thread(_tree.read, *self._where(file))
        except OSError:
            raise missing_file(file_id) from None  # removed by a call this moment
        assert content is not None
        return file, content

    async def delete_file(self, tenant: str | None, container_id: str, file_id: str) -> bool:
        await self.held(tenant, container_id)
        async with self._lock(container_id):
            file = await self.store.get_file(tenant, container_id, file_id)
            if file is None or not await self.store.delete_file(tenant, container_id, file_id):
                return False
            with contextlib.suppress(OSError):
                await asyncio.to_thread(_tree.unlink, *self._where(file))
        return True

    def _where(self, file: JSON) -> tuple[Path, str]:
        """The container's folder, and the file's path in it."""
        return self.folder(file["container_id"]), str(file["path"]).removeprefix(DATA + "/")

    # ------------------------------------------------------------ running code

    async def run(self, tenant: str | None, container_id: str, code: str) -> Ran:
        """Run `code` in the container (which must be held here); the files it wrote
        become its container files (source "assistant"), those it removed go."""
        await self.held(tenant, container_id)
        folder = self.folder(container_id)
        async with self._lock(container_id):
            await self.store.touch(tenant, container_id, int(time.time()))
            before = await asyncio.to_thread(_snapshot, folder)
            try:
                outcome = await self.sandbox.run(code, folder)
            except SandboxError as exc:
                log.warning("container %s: the call did not run: %s", container_id, exc)
                raise
            if outcome.dropped:
                _log_dropped(container_id, outcome.dropped)
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
        shown: list[str] = []  # images, by their path in the folder
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
                shown.append(relative)
        images = await asyncio.to_thread(_data_urls, self.folder(container_id), shown)
        gone = [f["id"] for path, f in known.items() if path.removeprefix(DATA + "/") not in after]
        await self.store.sync_files(tenant, container_id, written, gone)
        return Ran(outcome, written, images, len(shown) - len(images))

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
    """The container's files: the regular ones (what else a call left was not copied back)."""
    found = _tree.regular_files(folder, MAX_ENTRIES, MAX_DEPTH)
    return {path: (info.st_size, info.st_mtime_ns) for path, info in found.items()}


def _log_dropped(container_id: str, dropped: Dropped) -> None:
    log.warning(
        "container %s: the call's files not kept: %d links, FIFOs, sockets or devices; "
        "%d files (%d bytes) and %d folders over the limits (e.g. %s)",
        container_id,
        dropped.special,
        dropped.files,
        dropped.bytes,
        dropped.folders,
        ", ".join(dropped.names),
    )


def _data_urls(folder: Path, images: list[str]) -> list[str]:
    """The images as data: URLs, as many as MAX_IMAGES and MAX_IMAGES_BYTES allow."""
    urls: list[str] = []
    room = MAX_IMAGES_BYTES
    for relative in images:
        if len(urls) == MAX_IMAGES:
            break
        try:
            content = _tree.read(folder, relative, min(room, MAX_IMAGE_BYTES))
        except OSError:
            continue
        if content is None:
            continue  # over what is left of the total: a smaller one may still fit
        room -= len(content)
        media = mimetypes.guess_type(relative)[0] or "image/png"
        urls.append(f"data:{media};base64,{base64.b64encode(content).decode()}")
    return urls


def _remove(state: Path, name: str) -> None:
    fd = os.open(state, _tree.FOLDER)
    try:
        _tree.remove_tree(fd, name)
    finally:
        os.close(fd)


def _remove_stale(state: Path, live: set[str]) -> int:
    """Remove the folders of this replica's containers that are no longer in the store,
    and the scratch folders of calls that were killed (limits-only)."""
    removed = 0
    for entry in state.glob("cntr_*"):
        young = time.time() - entry.lstat().st_mtime < YOUNG_SECONDS
        if entry.name.removesuffix(SCRATCH) not in live and not young:
            with contextlib.suppress(OSError):
                _remove(state, entry.name)
            removed += not entry.name.endswith(SCRATCH)
    return removed
