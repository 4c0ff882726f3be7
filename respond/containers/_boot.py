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
   container's directory: regular files only, never following a link.

In "limits-only" mode (explicitly chosen, weaker) it does only steps 3 (no chroot, no
namespaces: the code runs in the container's directory itself) and 4's wait.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import signal
import stat
import sys
import time
from typing import Any

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
MAX_FILES = 1000  # copied back from /mnt/data per call; beyond, the rest are dropped
POLL_SECONDS = 0.01

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


def _load_seccomp() -> Any:
    """_seccomp.py beside this file: started with -I, the boot has no package to import from."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_seccomp", os.path.join(os.path.dirname(__file__), "_seccomp.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_seccomp = _load_seccomp()


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


def _build_root(job: dict[str, Any], owner: tuple[int, int]) -> str:
    root: str = job["root"]
    size = job["limits"]["disk"]
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
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
    _copy_in(job["workdir"], root + DATA, owner)
    _mount("none", root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root


# ---------------------------------------------------------------- files in and out


def _copy_in(host: str, sandbox: str, owner: tuple[int, int]) -> None:
    """The container's files into the sandbox's /mnt/data, owned by the sandbox user."""
    _copy_from(os.open(host, os.O_RDONLY | os.O_DIRECTORY), sandbox, owner)


def _copy_out(data: int, host: str) -> None:
    """The container's directory becomes what /mnt/data holds now. `data` is /mnt/data
    opened before the code ran: the code may have replaced what its path names."""
    for folder, _, files in os.walk(host, topdown=False):
        for name in files:
            os.unlink(os.path.join(folder, name))
        if folder != host:
            os.rmdir(folder)
    _copy_from(data, host, None)


def _copy_from(source: int, target: str, owner: tuple[int, int] | None) -> None:
    """Copy the regular files and directories under the directory `source` (a descriptor,
    closed here) into `target`: never following a link, skipping anything else, at most
    MAX_FILES files; `owner` owns the copies."""
    copied = 0
    try:
        for folder, _, files, fd in os.fwalk(".", dir_fd=source, follow_symlinks=False):
            here = os.path.normpath(os.path.join(target, folder))
            if here != target:
                os.makedirs(here, exist_ok=True)
                if owner is not None:
                    os.chown(here, *owner)
            for name in files:
                if copied < MAX_FILES and _copy_file(fd, name, os.path.join(here, name), owner):
                    copied += 1
    finally:
        os.close(source)


def _chown_tree(path: str, owner: tuple[int, int]) -> None:
    """limits-only as root: the sandbox user owns the container's directory."""
    os.chown(path, *owner)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), *owner, follow_symlinks=False)


def _copy_file(folder: int, name: str, target: str, owner: tuple[int, int] | None) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return False  # a link, or gone
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False  # a FIFO, a socket, a device
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            while chunk := os.read(fd, 1 << 20):
                os.write(out, chunk)
            if owner is not None:
                os.fchown(out, *owner)
            # The same times: respond tells the files a call wrote by their size and time.
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(out)
        return True
    finally:
        os.close(fd)


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
            os.chdir(job["workdir"])
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
    data = -1
    if job["mode"] == "namespaces":
        _unshare(job)
        root = _build_root(job, owner)
        data = os.open(root + DATA, os.O_RDONLY | os.O_DIRECTORY)
    elif job["uid"] is not None:
        _chown_tree(job["workdir"], owner)
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
    else:
        _copy_out(data, job["workdir"])
    return {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
    }


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    report = int(job["report"])
    # Die with the server: a sandbox outliving it would run unwatched.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != job["server"]:
        sys.exit(1)
    try:
        outcome = run(job)
    except BaseException as exc:
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    os.write(report, json.dumps(outcome).encode())
    os.close(report)


if __name__ == "__main__":
    main()
