"""Memory for a whole code_interpreter call: a cgroup of its own, with a memory limit.

`RLIMIT_AS` bounds each process, so a call that starts four children has four times the
limit. A memory cgroup bounds them together: each call's processes are put in a new group
under respond's own (the server moves the bootstrap there before it starts anything), the
kernel kills a process of the group when the group's memory is spent, and the group is
emptied and removed after the call. cgroup v2 where its memory controller is on, v1's
memory controller otherwise; `find` says why neither is usable (respond not root, nothing
writable), and the sandbox then keeps only `RLIMIT_AS` (docs/tools.md#limits).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CallGroup", "Memory", "find"]

PROC_CGROUP = Path("/proc/self/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")
SERVER_LEAF = "respond-server"  # v2: where the server moves itself to hand on the controller
EMPTY_SECONDS = 5.0  # how long removing a group waits for its killed processes to go
POLL_SECONDS = 0.01


@dataclass(frozen=True)
class Memory:
    """Where the calls' groups are made, and which cgroup version writes their limit."""

    version: int  # 1 or 2
    parent: Path

    def describe(self) -> str:
        return f"cgroup v{self.version} memory controller, groups under {self.parent}"

    def group(self, limit: int) -> CallGroup:
        """A new group for one call, its processes together at most `limit` bytes (swap
        included, so that the limit cannot be dodged by swapping). Raises OSError."""
        path = self.parent / f"respond-call-{secrets.token_hex(6)}"
        path.mkdir(mode=0o755)
        try:
            if self.version == 2:
                _write(path / "memory.max", limit)
                _write_if_there(path / "memory.swap.max", 0)
            else:
                _write(path / "memory.limit_in_bytes", limit)
                _write_if_there(path / "memory.memsw.limit_in_bytes", limit)
        except OSError:
            path.rmdir()
            raise
        return CallGroup(path, self.version)


@dataclass(frozen=True)
class CallGroup:
    """One call's memory cgroup."""

    path: Path
    version: int

    def join(self, pid: int) -> None:
        """Put `pid` (the call's bootstrap, before it starts anything) in the group: what
        it starts is in it too. Raises OSError."""
        _write(self.path / "cgroup.procs", pid)

    def oom_kills(self) -> int:
        """How many of the call's processes the kernel killed for the group's limit."""
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in (self.path / events).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> None:
        """Kill what is still in the group (a process that left the call's session), then
        remove it. Raises OSError if it will not empty."""
        deadline = time.monotonic() + EMPTY_SECONDS
        while True:
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(POLL_SECONDS)


def find() -> Memory | str:
    """The memory controller respond can make call groups with, or why there is none."""
    try:
        own = _own_groups()
        mounts = _mounts()
    except OSError as exc:
        return f"cannot read this process's cgroups: {exc}"
    reasons = []
    for version in (2, 1):
        if version not in own or version not in mounts:
            reasons.append(f"no cgroup v{version} memory controller")
            continue
        mount, root = mounts[version]
        relative = os.path.relpath(own[version], root)
        if relative.startswith(".."):
            reasons.append(f"this process's cgroup v{version} is outside the mounted one")
            continue
        here = Path(os.path.normpath(mount / relative))
        found = _usable(version, here)
        if isinstance(found, Memory):
            return found
        reasons.append(found)
    return "; ".join(reasons)


def _usable(version: int, here: Path) -> Memory | str:
    if not os.access(here, os.W_OK):
        return f"cgroup v{version}: {here} is not writable (respond is not root)"
    if version == 1:
        return Memory(1, here)
    try:
        _hand_on_memory(here)
    except OSError as exc:
        return f"cgroup v2: cannot turn the memory controller on below {here}: {exc}"
    return Memory(2, here)


def _hand_on_memory(here: Path) -> None:
    """cgroup v2 gives a controller to a group's children only while the group itself holds
    no process: the server moves itself to a leaf of its group first if it must."""
    control = here / "cgroup.subtree_control"
    if "memory" in control.read_text().split():
        return
    try:
        _write(control, "+memory")
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        leaf = here / SERVER_LEAF
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", os.getpid())
        _write(control, "+memory")  # still busy: other processes share the group


def _own_groups() -> dict[int, str]:
    """This process's memory cgroup per version (v1: the hierarchy with `memory`)."""
    found: dict[int, str] = {}
    for line in PROC_CGROUP.read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:
            found[2] = path
        elif "memory" in controllers.split(","):
            found[1] = path
    if 2 in found and not _v2_has_memory(found[2]):
        del found[2]
    return found


def _v2_has_memory(path: str) -> bool:
    for mount, root in _mount_points("cgroup2"):
        relative = os.path.relpath(path, root)
        controllers = mount / relative / "cgroup.controllers"
        with contextlib.suppress(OSError):
            return "memory" in controllers.read_text().split()
    return False


def _mounts() -> dict[int, tuple[Path, str]]:
    """The mount point of each version's memory hierarchy, and the cgroup it shows."""
    found: dict[int, tuple[Path, str]] = {}
    for mount, root in _mount_points("cgroup2"):
        found.setdefault(2, (mount, root))
    for mount, root in _mount_points("cgroup", "memory"):
        found.setdefault(1, (mount, root))
    return found


def _mount_points(fstype: str, option: str | None = None) -> list[tuple[Path, str]]:
    points = []
    for line in MOUNTINFO.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        kind, _, options = rest.split(" ")[:3]
        if kind != fstype or (option is not None and option not in options.split(",")):
            continue
        parts = fields.split(" ")
        points.append((Path(_unescape(parts[4])), _unescape(parts[3])))
    return points


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape."""
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def _write(path: Path, value: int | str) -> None:
    with open(path, "w") as out:
        out.write(str(value))


def _write_if_there(path: Path, value: int) -> None:
    if path.exists():
        _write(path, value)
