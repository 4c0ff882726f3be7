"""A container's files on disk, handled so that what model-written code leaves cannot be
turned against the server.

The code may leave links (to `secret.key`, `/etc/shadow`), FIFOs (a reader blocks forever),
sockets, sparse files (a few blocks, gigabytes once copied), hard links (one file, many
copies) and folders by the thousand. So every path here is opened one component at a time
from a folder's descriptor with `O_NOFOLLOW`; a file is opened `O_NONBLOCK` and checked with
`fstat` before a byte is read; only regular files and folders are copied, listed, read or
written, and a copy is counted as what it costs where it lands (`Budget`).

The sandbox's bootstrap (`_boot.py`, run as a script that imports only the standard
library) copies with it; the server lists, reads, writes and removes with it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO opens, unread
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
PAGE = os.sysconf("SC_PAGE_SIZE")
CHUNK = 1 << 20
NAMED = 5  # dropped paths a report names (for the log)

Owner = tuple[int, int]


def cost(size: int) -> int:
    """What a file of `size` bytes costs against the disk limit: its apparent size (a
    sparse file's holes are bytes once copied), in whole pages as the sandbox's tmpfs holds
    it, so that what was copied out always fits when copied back in."""
    return -(-size // PAGE) * PAGE


@dataclass
class Budget:
    """What one copy may still take (bytes, entries: files and folders, folder depth), what
    it took (`kept`, by path), and what it left out: entries that are not regular files or
    folders (`special`), and files and folders beyond a limit (a folder left out with
    whatever it holds). Every path counts: a hard link is one more copy of its file."""

    bytes: int
    entries: int
    depth: int
    special: int = 0
    files: int = 0
    folders: int = 0
    cut_bytes: int = 0  # apparent bytes of the files left out
    names: list[str] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, limits: dict[str, int]) -> Budget:
        return cls(limits["disk"], limits["entries"], limits["depth"])

    @property
    def cut(self) -> bool:
        return bool(self.files or self.folders)

    def report(self) -> dict[str, Any]:
        return {
            "special": self.special,
            "files": self.files,
            "folders": self.folders,
            "bytes": self.cut_bytes,
            "names": self.names,
        }

    def take_file(self, path: str, size: int) -> bool:
        if self.entries < 1 or cost(size) > self.bytes:
            self.files += 1
            self.cut_bytes += size
            self._name(path)
            return False
        self.entries -= 1
        self.bytes -= cost(size)
        self.kept.add(path)
        return True

    def take_folder(self, path: str, depth: int) -> bool:
        if self.entries < 1 or depth > self.depth:
            self.folders += 1
            self._name(path + "/")
            return False
        self.entries -= 1
        self.kept.add(path)
        return True

    def drop(self, path: str) -> None:
        self.special += 1
        self._name(path)

    def _name(self, path: str) -> None:
        if len(self.names) < NAMED:
            self.names.append(path[:200])


# ---------------------------------------------------------------- copying (the bootstrap)


def copy_tree(
    source: int,
    target: int,
    budget: Budget,
    owner: Owner | None = None,
    first: Set[str] = frozenset(),
    where: str = "",
) -> None:
    """Copy the regular files and folders in the folder `source` into the empty folder
    `target` (descriptors, left open) as far as `budget` goes. `owner`: the copies are the
    sandbox's, its user's and readable (into the sandbox); else private to whoever runs
    this (into the container's folder, the server's). In each folder the paths in `first`
    (what the container held before the call) go first, then files before folders, by
    name: what the code piles up is what a limit leaves out. Recursive: `budget.depth`
    bounds it, and the descriptors open at once."""
    depth = where.count("/") + 1
    with os.scandir(source) as listed:
        entries = sorted(
            listed,
            key=lambda e: (where + e.name not in first, e.is_dir(follow_symlinks=False), e.name),
        )
    for entry in entries:
        path = where + entry.name
        if entry.is_dir(follow_symlinks=False):
            _copy_folder(source, target, entry.name, path, depth, budget, owner, first)
        elif entry.is_file(follow_symlinks=False):
            _copy_file(source, target, entry.name, path, budget, owner)
        else:
            budget.drop(path)  # a link, FIFO, socket or device


def _copy_folder(
    source: int,
    target: int,
    name: str,
    path: str,
    depth: int,
    budget: Budget,
    owner: Owner | None,
    first: Set[str],
) -> None:
    try:
        inner = os.open(name, FOLDER, dir_fd=source)
    except OSError:
        budget.drop(path)  # became a link, or went
        return
    try:
        if not budget.take_folder(path, depth):
            return
        os.mkdir(name, 0o700, dir_fd=target)
        copy = os.open(name, FOLDER, dir_fd=target)
        try:
            if owner is not None:
                os.fchmod(copy, 0o755)
                os.fchown(copy, *owner)
            copy_tree(inner, copy, budget, owner, first, path + "/")
        finally:
            os.close(copy)
    finally:
        os.close(inner)


def _copy_file(
    source: int, target: int, name: str, path: str, budget: Budget, owner: Owner | None
) -> None:
    try:
        file = os.open(name, FILE, dir_fd=source)
    except OSError:
        budget.drop(path)  # became a link, or went
        return
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode):
            budget.drop(path)  # became a FIFO or a socket
            return
        if not budget.take_file(path, info.st_size):
            return
        copy = os.open(name, NEW, 0o600, dir_fd=target)
        try:
            _pour(file, copy, info.st_size)  # no more than was counted, should it grow
            if owner is not None:
                os.fchmod(copy, 0o644)
                os.fchown(copy, *owner)
            # The same times: respond tells the files a call wrote by their size and time.
            os.utime(copy, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(copy)
    finally:
        os.close(file)


def _pour(source: int, target: int, size: int) -> None:
    while size > 0 and (chunk := os.read(source, min(size, CHUNK))):
        size -= len(chunk)
        _pour_bytes(target, chunk)


# ---------------------------------------------------------------- removing


def remove_tree(parent: int, name: str) -> None:
    """Remove `name` from the folder `parent` with all it holds (nothing if it is gone),
    never following a link. Each folder is moved up into `parent` to be emptied there, so
    a tree nested thousands deep goes with two descriptors open and no recursion."""
    pending = [name]
    moved = 0
    while pending:
        name = pending.pop()
        try:
            os.unlink(name, dir_fd=parent)
            continue
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            pass
        folder = os.open(name, FOLDER, dir_fd=parent)
        try:
            with os.scandir(folder) as entries:
                inner = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            for child, is_folder in inner:
                if is_folder:
                    moved += 1
                    up = f".removing-{os.getpid()}-{moved}"
                    os.rename(child, up, src_dir_fd=folder, dst_dir_fd=parent)
                    pending.append(up)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(child, dir_fd=folder)
        finally:
            os.close(folder)
        os.rmdir(name, dir_fd=parent)


def clear(folder: int) -> None:
    """Remove everything in the folder `folder` (a descriptor)."""
    with os.scandir(folder) as entries:
        names = [e.name for e in entries]
    for name in names:
        remove_tree(folder, name)


# ---------------------------------------------------------------- the server's side


def regular_files(folder: Path, most: int, depth: int) -> dict[str, os.stat_result]:
    """The regular files under `folder` by path (relative, `/`-separated): at most `most`,
    in folders at most `depth` deep; links and the rest are not files of the container."""
    found: dict[str, os.stat_result] = {}
    top = os.open(folder, FOLDER)
    try:
        _list(top, "", depth, most, found)
    finally:
        os.close(top)
    return found


def _list(fd: int, where: str, depth: int, most: int, found: dict[str, os.stat_result]) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            if len(found) >= most:
                return
            if entry.is_file(follow_symlinks=False):
                found[where + entry.name] = entry.stat(follow_symlinks=False)
            elif entry.is_dir(follow_symlinks=False) and where.count("/") < depth:
                try:
                    inner = os.open(entry.name, FOLDER, dir_fd=fd)
                except OSError:
                    continue
                try:
                    _list(inner, f"{where}{entry.name}/", depth, most, found)
                finally:
                    os.close(inner)


@contextlib.contextmanager
def parent(folder: Path, relative: str) -> Iterator[tuple[int, str]]:
    """The folder (a descriptor) holding `relative`, a path under `folder` opened one
    component at a time without following a link, and the name in it."""
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise FileNotFoundError(relative)
    fd = os.open(folder, FOLDER)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, FOLDER, dir_fd=fd)
            except OSError:
                raise FileNotFoundError(relative) from None  # a link, a file, nothing
            os.close(fd)
            fd = inner
        yield fd, parts[-1]
    finally:
        os.close(fd)


def read(folder: Path, relative: str, most: int | None = None) -> bytes | None:
    """The bytes of the regular file `relative` under `folder`; None if it has more than
    `most`. Anything else (a link, a FIFO, nothing) is FileNotFoundError."""
    with parent(folder, relative) as (fd, name):
        file = os.open(name, FILE, dir_fd=fd)
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError(relative)
        if most is not None and info.st_size > most:
            return None
        chunks = []
        size = info.st_size
        while size > 0 and (chunk := os.read(file, min(size, CHUNK))):
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(file)


def write(folder: Path, relative: str, content: bytes) -> None:
    """Make `relative` under `folder` a regular file holding `content`: written aside, then
    renamed over the name, so whatever the name was (a link) is replaced, never followed.
    IsADirectoryError if it is a folder."""
    with parent(folder, relative) as (fd, name):
        aside = f".upload-{secrets.token_hex(8)}"
        out = os.open(aside, NEW, 0o600, dir_fd=fd)
        try:
            try:
                _pour_bytes(out, content)
            finally:
                os.close(out)
            os.replace(aside, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(aside, dir_fd=fd)
            raise


def _pour_bytes(fd: int, content: bytes) -> None:
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]


def unlink(folder: Path, relative: str) -> None:
    """Remove the file `relative` under `folder`, if it is there."""
    with contextlib.suppress(FileNotFoundError), parent(folder, relative) as (fd, name):
        os.unlink(name, dir_fd=fd)
