"""Running one code_interpreter call in the sandbox, from the server's side.

Each call is a fresh process tree: `_boot.py` (started as its own interpreter, in a new
session) isolates and limits the code and reports how it ended; this module feeds it the
job, reads the code's output (capped), and kills the whole tree if the call runs past its
time, is cancelled (the client went away), or the bootstrap itself hangs. What each mode
isolates, and what it needs, is in docs/tools.md#the-sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from respond.containers import _cgroup, _users

log = logging.getLogger("respond.containers")

__all__ = ["Dropped", "Limits", "Outcome", "Sandbox", "SandboxError", "SandboxMode", "Users"]

SandboxMode = Literal["namespaces", "limits-only"]
BOOT = Path(__file__).with_name("_boot.py")
DATA = "/mnt/data"  # where the code sees a container's files
MAX_OUTPUT_BYTES = 64 * 1024  # of the code's output kept; the rest is read and dropped
# What a call's folder may hold when copied back (beside the disk limit, in bytes): files
# and folders together, and how deep folders nest. Fixed: they bound what one call leaves
# on the host, and the work of every later call that copies it in.
MAX_ENTRIES = 1000
MAX_DEPTH = 32
# Files and folders the code may have at once in namespaces mode (/mnt/data, /tmp and the
# root's own few dozen): its tmpfs's nr_inodes.
MAX_INODES = 100_000
# Beyond the call's timeout, how long the bootstrap gets to copy files back and report.
GRACE_SECONDS = 15.0
# respond as root: the users calls run as, each running call one of its own (uid and gid).
FIRST_UID = 60000
USERS = 64
LEASES = Path("/run/respond-sandbox-users")  # host-wide: which of those uids are in use
KILL_SECONDS = 5.0  # how long a call's leftover processes get to die before their uid is reused


class SandboxError(Exception):
    """The sandbox could not run the code (not the code's own failure)."""


@dataclass(frozen=True)
class Limits:
    """What one call may use (docs/tools.md#the-sandbox; the defaults are Settings')."""

    timeout: float  # wall-clock seconds
    cpu_seconds: int
    memory_mb: int  # the call's cgroup, where there is one; each process's RLIMIT_AS
    disk_mb: int  # /mnt/data and /tmp together; also the largest file
    processes: int  # RLIMIT_NPROC of the call's user


@dataclass(frozen=True)
class Dropped:
    """What the copy back left out of the container: entries that are not regular files or
    folders (links, FIFOs, sockets, devices), and files and folders beyond the limits."""

    special: int = 0
    files: int = 0
    folders: int = 0  # each with whatever it held
    bytes: int = 0  # the apparent size of the files left out
    names: tuple[str, ...] = ()  # the first few of them

    def __bool__(self) -> bool:
        return bool(self.special or self.files or self.folders)

    @classmethod
    def of(cls, report: dict[str, Any]) -> Dropped:
        return cls(
            special=int(report["special"]),
            files=int(report["files"]),
            folders=int(report["folders"]),
            bytes=int(report["bytes"]),
            names=tuple(str(n) for n in report["names"]),
        )

    def notes(self, limits: Limits) -> list[str]:
        """What the call's output says about it."""
        said = []
        if self.special:
            said.append(
                f"[{self.special} entries in {DATA} were not kept: links, FIFOs, sockets and "
                "devices are not container files (only regular files and folders are).]"
            )
        if self.files or self.folders:
            said.append(
                f"[Not kept: {self.files} files ({_size(self.bytes)}) and {self.folders} "
                f"folders. The files kept from a call are at most {MAX_ENTRIES} files and "
                f"folders, {limits.disk_mb} MiB in all (apparent sizes: a sparse file counts "
                f"every byte, a hard link as one more copy), folders {MAX_DEPTH} deep.]"
            )
        return said


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count} bytes"


@dataclass(frozen=True)
class Outcome:
    """How one call ended: its output, why it stopped, and what of its files was left out."""

    output: str
    truncated: bool = False
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    dropped: Dropped = Dropped()
    memory_kills: int = 0  # processes the kernel killed for the call's memory limit


class Users:
    """The uids calls run as when respond is root, FIRST_UID and the USERS - 1 after it:
    each running call has one to itself, so that RLIMIT_NPROC counts its processes alone
    (one tenant's processes cannot make another's fork fail) and no call's code can signal
    or read another's processes. A call holds its uid by a lock on a file in `leases`, so
    that the respond processes of one host (replicas, restarts) never share one: the end of
    a call kills every process of its uid. The lock goes once nothing runs as the uid."""

    def __init__(self, leases: Path = LEASES) -> None:
        leases.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._leases = leases
        self._held: dict[int, int] = {}  # uid -> its lock file's descriptor
        self._next = 0  # where the next search starts: a uid given back rests longest

    def take(self) -> int:
        for n in range(USERS):
            uid = FIRST_UID + (self._next + n) % USERS
            fd = os.open(self._leases / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # this process's own too
            except BlockingIOError:
                os.close(fd)
                continue
            self._held[uid] = fd
            self._next = uid - FIRST_UID + 1
            return uid
        raise SandboxError(f"all {USERS} sandbox users are running calls; try again")

    def give_back(self, uid: int) -> None:
        """Free `uid` once none of its processes is left; else it stays held (retired)."""
        if _kill_user(uid):
            os.close(self._held.pop(uid))  # the lock with it


@dataclass(frozen=True)
class Sandbox:
    mode: SandboxMode
    python: str  # the interpreter the code runs on
    binds: tuple[str, ...]  # its installation's folders, bound read-only in the root
    users: Users | None  # respond as root: the calls' uids; else None: the server's own
    limits: Limits
    root: Path  # an empty folder the sandbox's root is mounted on (in its own namespace)
    # Where each call's memory cgroup is made; None: RLIMIT_AS per process only, and why.
    memory: _cgroup.Memory | None = None
    memory_unlimited: str = ""

    @classmethod
    def make(
        cls, mode: SandboxMode, limits: Limits, state: Path, *, python: str | None = None
    ) -> Sandbox:
        """The sandbox for these settings; `state` is where containers live. Raises
        SandboxError saying what is missing."""
        python = python or sys.executable
        root = state / ".root"
        root.mkdir(parents=True, exist_ok=True)
        # Only the server goes through it: the code of one container (limits-only, where
        # it runs in the host's tree) cannot reach another's folder from its own.
        state.chmod(0o700)
        memory = _cgroup.find()
        return cls(
            mode,
            python,
            _installation(python),
            _users_of_root(),
            limits,
            root,
            memory if isinstance(memory, _cgroup.Memory) else None,
            memory if isinstance(memory, str) else "",
        )

    def memory_limit(self) -> str:
        """What the memory limit bounds here, for the log at start."""
        mib = self.limits.memory_mb
        if self.memory is not None:
            tmpfs = self._group_mb() - mib
            room = f" (and {tmpfs} MiB for the files in its tmpfs)" if tmpfs else ""
            return (
                f"{mib} MiB per call, its processes together{room}, and {mib} MiB of address "
                f"space per process ({self.memory.describe()})"
            )
        return (
            f"{mib} MiB of address space per process (RLIMIT_AS), not per call: a call "
            f"with N processes may use N times that ({self.memory_unlimited})"
        )

    async def run(self, code: str, workdir: Path) -> Outcome:
        """Run `code` with `workdir` (the container's files) as /mnt/data. Cancelling the
        caller kills the call's processes."""
        uid = self.users.take() if self.users is not None else None
        try:
            group = self._group()
            try:
                return await self._run(code, workdir, uid, group)
            finally:
                if group is not None:
                    await asyncio.to_thread(_remove_group, group)
        finally:
            if self.users is not None and uid is not None:
                await asyncio.to_thread(self.users.give_back, uid)

    def _group(self) -> _cgroup.CallGroup | None:
        if self.memory is None:
            return None
        try:
            return self.memory.group(self._group_mb() * 1024 * 1024)
        except OSError as exc:
            raise SandboxError(f"cannot make the call's memory cgroup: {exc}") from None

    def _group_mb(self) -> int:
        """The call's cgroup limit: its memory, and in namespaces mode room for its tmpfs
        (`/mnt/data` and `/tmp`, up to the disk limit), whose pages the kernel counts in the
        group and cannot reclaim. Without that room, code that filled both would leave the
        bootstrap no memory to copy its files back: the kernel would kill it too."""
        tmpfs = self.limits.disk_mb if self.mode == "namespaces" else 0
        return self.limits.memory_mb + tmpfs

    async def _run(
        self, code: str, workdir: Path, uid: int | None, group: _cgroup.CallGroup | None
    ) -> Outcome:
        report_read, report_write = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                str(BOOT),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(report_write,),
                start_new_session=True,  # its group is killed whole, never the server's
            )
        finally:
            os.close(report_write)
        try:
            if group is not None:
                _join(group, process.pid)
            job = self._job(code, workdir, report_write, uid)
            outcome = await asyncio.wait_for(
                self._converse(process, job, report_read),
                self.limits.timeout + GRACE_SECONDS,
            )
            if group is not None:
                outcome = replace(outcome, memory_kills=group.oom_kills())
            return outcome
        except TimeoutError:
            raise SandboxError("the sandbox did not report in time; it was killed") from None
        except SandboxError:
            if group is not None and group.oom_kills():  # the bootstrap too, before it reported
                raise SandboxError(
                    f"the call used more than its {self.limits.memory_mb} MiB of memory (all "
                    "its processes together); the kernel killed its sandbox"
                ) from None
            raise
        finally:
            _kill(process)
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
            os.close(report_read)

    def _job(self, code: str, workdir: Path, report: int, uid: int | None) -> dict[str, Any]:
        limits = self.limits
        return {
            "mode": self.mode,
            "python": self.python,
            "binds": list(self.binds),
            "workdir": str(workdir),
            "root": str(self.root),
            "uid": uid,
            "gid": uid,
            "limits": {
                "cpu": limits.cpu_seconds,
                "memory": limits.memory_mb * 1024 * 1024,
                "disk": limits.disk_mb * 1024 * 1024,
                "processes": limits.processes,
                "entries": MAX_ENTRIES,
                "depth": MAX_DEPTH,
                "inodes": MAX_INODES,
            },
            "timeout": limits.timeout,
            "code": code,
            "report": report,
            "server": os.getpid(),
        }

    async def _converse(
        self, process: asyncio.subprocess.Process, job: dict[str, Any], report: int
    ) -> Outcome:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(job).encode())
        await process.stdin.drain()
        process.stdin.close()
        kept = bytearray()
        truncated = False
        while chunk := await process.stdout.read(65536):
            room = MAX_OUTPUT_BYTES - len(kept)
            kept += chunk[:room]
            truncated = truncated or len(chunk) > room
        await process.wait()
        raw = await asyncio.to_thread(os.read, report, 65536)
        try:
            ended = json.loads(raw)
        except ValueError:
            raise SandboxError("the sandbox stopped without reporting") from None
        if "error" in ended:
            raise SandboxError(ended["error"])
        return Outcome(
            output=kept.decode(errors="replace"),
            truncated=truncated,
            exit_code=ended["exit"],
            signal=ended["signal"],
            timed_out=ended["timed_out"],
            dropped=Dropped.of(ended["dropped"]),
        )

    def probe(self) -> None:
        """Run one line in this sandbox now; raises SandboxError if it cannot run code."""
        with tempfile.TemporaryDirectory(dir=self.root.parent, prefix=".probe-") as work:
            outcome = asyncio.run(self.run("6 * 7", Path(work)))
        if outcome.output.strip() != "42" or outcome.exit_code != 0:
            said = outcome.output.strip()[-500:] or "(no output)"
            raise SandboxError(f"a test run of the code's interpreter failed: {said}")


def _kill(process: asyncio.subprocess.Process) -> None:
    """The bootstrap's group, unless it has ended (and been reaped: its id may be another
    process's now); the code's own processes die with the bootstrap (their parent-death
    signal) and with their namespace's first process."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _users_of_root() -> Users | None:
    """respond as root: the pool of uids calls run as; else None (the calls run as the
    server's own user)."""
    if os.geteuid() != 0:
        return None
    try:
        return Users()
    except OSError as exc:
        raise SandboxError(f"cannot keep the sandbox users' leases in {LEASES}: {exc}") from None


def _join(group: _cgroup.CallGroup, pid: int) -> None:
    """The bootstrap into the call's group: it waits for its job, so nothing it starts is
    outside."""
    try:
        group.join(pid)
    except OSError as exc:
        raise SandboxError(f"cannot put the call in its memory cgroup: {exc}") from None


def _remove_group(group: _cgroup.CallGroup) -> None:
    """Empty and remove the call's group; one that will not empty is left (and logged)
    rather than failing a call whose outcome is known."""
    try:
        group.remove()
    except OSError as exc:
        log.warning("cannot remove the call's memory cgroup %s: %s", group.path, exc)


def _kill_user(uid: int) -> bool:
    """Whether no process of `uid` is left (so that it can serve another call): the bootstrap
    kills them, unless it was killed itself first."""
    if _users.kill_all(uid, KILL_SECONDS):
        return True
    log.warning("processes of sandbox user %d will not die: the uid is retired", uid)
    return False


def _installation(python: str) -> tuple[str, ...]:
    """The folders the interpreter needs that are outside the system's (a virtual
    environment and the Python it was made from): bound read-only at their own paths."""
    ask = "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix]))"
    try:
        found = subprocess.run(
            [python, "-I", "-c", ask],
            capture_output=True,
            timeout=30,
            check=True,
            text=True,
        )
        prefixes = json.loads(found.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxError(f"cannot run the code's interpreter {python!r}: {exc}") from None
    real = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    return tuple(dict.fromkeys(str(p) for p in (*prefixes, real)))
