"""The sandbox's first process: isolates, limits and runs one code_interpreter call.

respond starts this file as a fresh interpreter (`python -I -S _boot.py`), never by forking
the server: the server has threads (llama.cpp's decode thread), and unsharing namespaces or
changing users in a forked copy of it is unsafe. It imports only the standard library, so
it starts in milliseconds. It reads its job (JSON) on stdin; the code's output (stdout and
stderr together) goes to its stdout; its report (JSON) to the file descriptor `report`.

In "namespaces" mode it
1. leaves the server's namespaces: its own mount, network (loopback only, down), PID, IPC
   and UTS namespaces; a user namespace too when respond is not root;
2. builds a root of its own in a size-limited tmpfs: the system's /usr, /bin, /lib... and
   the interpreter's installation bound read-only at their own paths, /dev/null & co.,
   a fresh /proc, /tmp, and /mnt/data holding a copy of the container's files;
3. forks the code's process, which is PID 1 of the new PID namespace (when it ends, the
   kernel kills everything it started), chroots there, takes its limits, drops to the
   sandbox user (root mode) and runs the interpreter with an empty environment;
4. waits at most `timeout` seconds (then kills it), and copies /mnt/data back into the
   container's directory: regular files and folders only, never following a link, within
   the limits on bytes and entries (`_tree.py`); what it leaves out is in its report.

In "limits-only" mode (explicitly chosen, weaker) it does step 3 without namespaces or a
chroot: the code runs in a scratch copy of the container's directory (`<id>.work`, the
sandbox user's), which step 4 copies back by the same rules and removes. The container's
directory itself stays the server's, out of reach of the code. As root, every process of
the call's own user is killed before the copy back, one that left the call's session too.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import json
import os
import resource
import signal
import sys
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any


def _sibling(name: str) -> ModuleType:
    """respond's module `name` beside this file (standard library only): this file runs as
    a script (-I -S), without respond on its path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_respond_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would (dataclasses look it up)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from respond.containers import _seccomp, _tree, _users
else:
    _seccomp = _sibling("_seccomp")
    _tree = _sibling("_tree")
    _users = _sibling("_users")

# From <sched.h>, <sys/mount.h>, <sys/prctl.h>.
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
# statvfs's ST_* flags a bind mount keeps: the same bits as MS_NOEXEC, MS_NOATIME,
# MS_NODIRATIME and MS_RELATIME.
KEPT_FLAGS = 8 | 1024 | 2048 | 4096
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

# The system's directories the interpreter needs (those that exist are bound read-only).
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
DATA = "/mnt/data"
WRITABLE = ".rw"  # in the root: the writable places, one tmpfs
SCRATCH = ".work"  # limits-only: the code's folder is the container's, with this suffix
POLL_SECONDS = 0.01
KILL_SECONDS = 5.0  # for what the code left running to die, before its files are copied back

# What the code's interpreter runs: the code, read from stdin, as a notebook cell (the
# value of a last expression is printed, as Jupyter shows it).
RUNNER = """\
import ast, sys, traceback
source = sys.stdin.read()
sys.stdin.close()
try:
    tree = ast.parse(source, "<cell>")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    scope = {"__name__": "__main__"}
    exec(compile(tree, "<cell>", "exec"), scope)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), scope)
        if value is not None:
            print(repr(value))
except SystemExit:
    raise
except BaseException as exc:
    # Only the cell's frames (a syntax error has none).
    frames = None if isinstance(exc, SyntaxError) else exc.__traceback__.tb_next
    traceback.print_exception(type(exc), exc, frames)
    sys.exit(1)
"""

_libc = ctypes.CDLL(None, use_errno=True)


class Refused(Exception):
    """The call cannot run, for a reason the caller is told as it is."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _bind(source: str, target: str, *, readonly: bool = True) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        # Keep the flags the source has (a user namespace may not drop them), add ours.
        kept = os.statvfs(target).f_flag & KEPT_FLAGS
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | kept
        _mount("none", target, None, flags)


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


# ---------------------------------------------------------------- namespaces and the root


def _unshare(job: dict[str, Any]) -> None:
    userns = job["uid"] is None and os.geteuid() != 0
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    # libc's: os.unshare is Python 3.12's.
    _check(_libc.unshare(flags | (CLONE_NEWUSER if userns else 0)), "unshare")
    if userns:
        # The server's own user, mapped to itself: the code runs as it (not as root in the
        # namespace), and loses the namespace's capabilities when it executes Python.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host


def _write(path: str, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


def _build_root(job: dict[str, Any], owner: tuple[int, int]) -> tuple[str, set[str]]:
    root: str = job["root"]
    size = job["limits"]["disk"]
    # nr_inodes: files and folders at once, so that copying back walks a bounded tree.
    options = f"size={size},nr_inodes={job['limits']['inodes']},mode=0755"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for name in SYSTEM:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{root}/{name}")
        elif os.path.isdir(host):
            os.mkdir(f"{root}/{name}")
            _bind(host, f"{root}/{name}")
    for folder in ("dev", "proc", "etc", "tmp", "mnt/data", WRITABLE):
        os.makedirs(f"{root}/{folder}", mode=0o755)
    for name in DEVICES:
        with open(f"{root}/dev/{name}", "w"):
            pass
        _bind(f"/dev/{name}", f"{root}/dev/{name}", readonly=False)
    # What the code may write is in the same tmpfs (one size limit for all), bound where
    # it is used; the rest of the root is read-only, so that no path the bootstrap reads
    # afterwards can be swapped for a link.
    for place, mode in (("/tmp", 0o1777), (DATA, 0o755)):
        inner = f"{root}/{WRITABLE}/{place.strip('/').replace('/', '-')}"
        os.mkdir(inner)
        os.chmod(inner, mode)
        os.chown(inner, *owner)
        _bind(inner, root + place, readonly=False)
    # The interpreter's installation, where it is not in the system's folders; bound after
    # the writable places, so that one under /tmp (a checkout there) is not hidden by them.
    for path in job["binds"]:
        if any(path == f"/{n}" or path.startswith(f"/{n}/") for n in SYSTEM):
            continue
        os.makedirs(root + path, mode=0o755, exist_ok=True)
        _bind(path, root + path)
    data = os.open(root + DATA, _tree.FOLDER)
    try:
        before = _copy_in(job, data, owner)
    finally:
        os.close(data)
    _mount("none", root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root, before


# ---------------------------------------------------------------- files in and out


def _copy_in(job: dict[str, Any], data: int, owner: tuple[int, int]) -> set[str]:
    """The container's files into the folder the code sees (`data`), owned by the sandbox
    user; their paths. All of them, or the call does not run: what is not copied in would
    be lost when the call's files are copied back."""
    limits = job["limits"]
    budget = _tree.Budget.of(limits)
    host = os.open(job["workdir"], _tree.FOLDER)
    try:
        _tree.copy_tree(host, data, budget, owner)
    finally:
        os.close(host)
    if budget.cut:
        raise Refused(
            "the container holds more than a call may take in (at most "
            f"{limits['entries']} files and folders, {limits['disk'] >> 20} MiB, folders "
            f"{limits['depth']} deep): delete some of its files"
        )
    return budget.kept


def _copy_out(data: int, host: str, limits: dict[str, int], before: set[str]) -> dict[str, Any]:
    """The container's directory becomes what the code's folder holds now, within the
    limits, what it held `before` the call first. `data` is that folder opened before the
    code ran: the code may have replaced what its path names. Returns what was left out
    (the report's "dropped")."""
    budget = _tree.Budget.of(limits)
    target = os.open(host, _tree.FOLDER)
    try:
        _tree.clear(target)
        _tree.copy_tree(data, target, budget, first=before)
    finally:
        os.close(target)
    return budget.report()


def _scratch(job: dict[str, Any], owner: tuple[int, int]) -> tuple[int, set[str]]:
    """limits-only: the folder the code runs in (opened), a copy of the container's, its
    user's; the paths copied in. A killed call's is removed first."""
    state, name = os.path.split(job["workdir"] + SCRATCH)
    parent = os.open(state, _tree.FOLDER)
    try:
        _tree.remove_tree(parent, name)
        os.mkdir(name, 0o700, dir_fd=parent)
        work = os.open(name, _tree.FOLDER, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        os.fchown(work, *owner)
        return work, _copy_in(job, work, owner)
    except BaseException:
        os.close(work)
        _remove_scratch(job)
        raise


def _remove_scratch(job: dict[str, Any]) -> None:
    state, name = os.path.split(job["workdir"] + SCRATCH)
    parent = os.open(state, _tree.FOLDER)
    try:
        # A process the code left running may still write there: the sweep gets the rest.
        with contextlib.suppress(OSError):
            _tree.remove_tree(parent, name)
    finally:
        os.close(parent)


# ---------------------------------------------------------------- the code's process


def _limit(limits: dict[str, int]) -> None:
    cpu = limits["cpu"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["disk"], limits["disk"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(job: dict[str, Any], root: str | None, code_in: int) -> None:
    """In the forked process: become the sandbox, then the interpreter. Never returns."""
    try:
        if root is not None:
            _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            os.chroot(root)
            os.chdir(DATA)
        else:
            os.chdir(job["workdir"] + SCRATCH)
        os.setsid()  # its own process group: a kill(0) reaches only the sandbox
        _limit(job["limits"])
        if job["uid"] is not None:
            os.setgroups([])
            os.setgid(job["gid"])
            os.setuid(job["uid"])
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
        if root is not None:  # namespaces mode: the syscalls a Python sandbox never needs
            _seccomp.install(_libc)
        os.dup2(code_in, 0)
        os.closerange(3, 1 << 16)  # the report and every other descriptor stay outside
        python = job["python"]
        os.execve(python, [python, "-I", "-c", RUNNER], {})
    except BaseException as exc:
        os.write(2, f"The sandbox could not start the code: {exc}\n".encode())
    os._exit(127)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """The child's wait status, and whether it was killed for running past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: everything it started dies
            return os.waitpid(pid, 0)[1], True
        time.sleep(POLL_SECONDS)


def run(job: dict[str, Any]) -> dict[str, Any]:
    owner = (job["uid"], job["gid"]) if job["uid"] is not None else (os.getuid(), os.getgid())
    root = None
    if job["mode"] == "namespaces":
        _unshare(job)
        root, before = _build_root(job, owner)
        data = os.open(root + DATA, _tree.FOLDER)
    else:
        data, before = _scratch(job, owner)
    try:
        status, timed_out = _run_code(job, root)
        dropped = _copy_out(data, job["workdir"], job["limits"], before)
    finally:
        os.close(data)
        if root is None:
            _remove_scratch(job)
    return {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "dropped": dropped,
    }


def _run_code(job: dict[str, Any], root: str | None) -> tuple[int, bool]:
    """Start the code, feed it, wait for it; its wait status and whether it timed out."""
    code_in, code_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(code_out)
        _child(job, root, code_in)
    os.close(code_in)
    # Only the code's processes hold the output now: it ends when they all have.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        code = memoryview(job["code"].encode())
        while code:
            code = code[os.write(code_out, code) :]
    except OSError as exc:
        if exc.errno != errno.EPIPE:  # the code ended without reading all of itself
            raise
    finally:
        os.close(code_out)
    status, timed_out = _wait(pid, job["timeout"])
    if root is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # what it left running in its group
        if job["uid"] is not None:  # the call's own user: everything it left, at once
            _users.kill_all(job["uid"], KILL_SECONDS)
    return status, timed_out


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    report = int(job["report"])
    # Die with the server: a sandbox outliving it would run unwatched.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != job["server"]:
        sys.exit(1)
    try:
        outcome = run(job)
    except Refused as exc:
        outcome = {"error": str(exc)}
    except BaseException as exc:
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    os.write(report, json.dumps(outcome).encode())
    os.close(report)


if __name__ == "__main__":
    main()
