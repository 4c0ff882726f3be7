"""A seccomp filter for the `namespaces` sandbox: what a Python sandbox never needs is refused.

Installed by the boot in the code's process after PR_SET_NO_NEW_PRIVS and before execve, so
every process the code starts inherits it and none can remove it. Refused calls fail with
EPERM (the code sees an ordinary error, not a kill); clone3 answers ENOSYS so libc falls back
to clone, whose flags a classic BPF filter can read (clone3 passes them behind a pointer).
Written with ctypes and prctl: no library. The list is in docs/tools.md.
"""

from __future__ import annotations

import ctypes
import errno
import platform

# Kernel ABI constants, from <linux/seccomp.h>, <linux/filter.h>, <linux/audit.h>.
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_W_ABS, JEQ, JGE, AND, RET = 0x20, 0x15, 0x35, 0x54, 0x06
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (ARG0: low 32 bits, little-endian)
X32_BIT = 0x40000000  # x86_64's x32 ABI numbers: a second way to reach every call
CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
CLONE_NEWTIME = 0x80  # shares a bit with CSIGNAL in clone's flags, so only clone3 could ask

# Refused by name; the numbers per architecture follow.
REFUSED = (
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "ptrace", "process_vm_readv", "process_vm_writev",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "unshare", "setns", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
    "open_by_handle_at", "name_to_handle_at", "settimeofday", "clock_settime", "vhangup",
)  # fmt: skip

_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "move_mount": 429,
    "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "unshare": 272, "setns": 308, "reboot": 169, "swapon": 167,
    "swapoff": 168, "acct": 163, "quotactl": 179, "syslog": 103, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "settimeofday": 164, "clock_settime": 227, "vhangup": 153,
    "clone": 56, "clone3": 435,
}  # fmt: skip
_AARCH64 = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "move_mount": 429,
    "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
    "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
    "userfaultfd": 282, "unshare": 97, "setns": 268, "reboot": 142, "swapon": 224,
    "swapoff": 225, "acct": 89, "quotactl": 60, "syslog": 116, "open_by_handle_at": 265,
    "name_to_handle_at": 264, "settimeofday": 170, "clock_settime": 112, "vhangup": 58,
    "clone": 220, "clone3": 435,
}  # fmt: skip
# machine -> (AUDIT_ARCH_*, numbers)
ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter as (code, jt, jf, k) instructions, or None for an architecture not listed."""
    if machine not in ARCHES:
        return None
    audit_arch, nrs = ARCHES[machine]
    # Jumps name labels; they are resolved to the forward offsets BPF wants at the end.
    body: list[tuple[int, str | int, str | int, int]] = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ, 0, "deny", audit_arch),  # another ABI (int 0x80 on x86_64) is refused whole
        (LD_W_ABS, 0, 0, NR),
    ]
    if machine == "x86_64":
        body.append((JGE, "deny", 0, X32_BIT))
    body += [(JEQ, "deny", 0, nrs[name]) for name in REFUSED]
    body += [
        (JEQ, "clone", 0, nrs["clone"]),
        (JEQ, "nosys", 0, nrs["clone3"]),
        (RET, 0, 0, RET_ALLOW),
    ]
    labels = {"clone": len(body)}
    body += [
        (LD_W_ABS, 0, 0, ARG0),
        (AND, 0, 0, CLONE_NAMESPACES),
        (JEQ, 0, "deny", 0),  # threads and fork pass; a new namespace does not
        (RET, 0, 0, RET_ALLOW),
    ]
    labels["deny"] = len(body)
    body.append((RET, 0, 0, RET_ERRNO | errno.EPERM))
    labels["nosys"] = len(body)
    body.append((RET, 0, 0, RET_ERRNO | errno.ENOSYS))

    def offset(at: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return [(c, offset(i, jt), offset(i, jf), k) for i, (c, jt, jf, k) in enumerate(body)]


def listed() -> bool:
    """Whether this machine's architecture has a list (else no filter is installed)."""
    return platform.machine() in ARCHES


def install(libc: ctypes.CDLL) -> bool:
    """Install the filter in this process (NO_NEW_PRIVS must be set); False if the
    architecture has no list. Raises OSError when the kernel refuses it."""
    insns = program(platform.machine())
    if insns is None:
        return False
    array = (_Insn * len(insns))(*(_Insn(*insn) for insn in insns))
    prog = _Prog(len(insns), array)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {errno.errorcode.get(err, err)}")
    return True
