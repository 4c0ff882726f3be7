"""Is an `--rpc` server still there? Read off this process's own connection to it.

llama.cpp's RPC client aborts the whole process when a server it decodes on has gone
(ggml-rpc.cpp: "Remote RPC server crashed"), so respond must notice before it decodes: a
request to a model whose rpc-server is gone gets a 503 and /health says which server, instead
of a dead process. A probe connection cannot tell: `rpc-server` serves one client at a time,
so a second connection waits in its backlog (and a full backlog looks like a dead server).
The kernel knows: the connection llama.cpp holds leaves ESTABLISHED when the server closes it
or dies (CLOSE_WAIT), so /proc/net/tcp for this process's sockets is the answer (Linux; on
other systems every server counts as there).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["connected"]

_ESTABLISHED = "01"


def connected(endpoint: str) -> bool:
    """Whether this process holds an open connection to the rpc-server at HOST:PORT."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return True
    host, _, port = endpoint.rpartition(":")
    addresses = _addresses(host.strip("[]"), int(port))
    mine = _socket_inodes()
    for table in tables:
        for remote, state, inode in _rows(table):
            if inode in mine and remote in addresses and state == _ESTABLISHED:
                return True
    return False


def _addresses(host: str, port: int) -> set[str]:
    """HOST:PORT as /proc/net/tcp{,6} writes a remote address (hex, host byte order)."""
    found = set()
    for family, _, _, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        packed = socket.inet_pton(family, str(address[0]))
        if family == socket.AF_INET:
            text = packed[::-1].hex().upper()
        else:  # four 32-bit words, each in host (little-endian) order
            text = "".join(packed[i : i + 4][::-1].hex().upper() for i in range(0, 16, 4))
        found.add(f"{text}:{port:04X}")
    return found


def _socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _rows(table: Path) -> list[tuple[str, str, str]]:
    """(remote address, state, inode) of each row."""
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return []
    rows = []
    for line in lines:
        fields = line.split()
        if len(fields) > 9:
            rows.append((fields[2], fields[3], fields[9]))
    return rows
