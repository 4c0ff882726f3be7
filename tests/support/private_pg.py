"""A PostgreSQL server of the test's own (the machine's binaries, a cluster in a temporary
folder, its own port), so a test may restart it without touching the shared one."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import free_port

__all__ = ["PrivatePostgres", "start_private_postgres"]


def _bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("PostgreSQL's server binaries are missing (Debian: postgresql)")
    return found[-1].parent


def _as_owner(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: run it as the postgres user there.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class PrivatePostgres:
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        data = str(self.folder / "data")
        log = str(self.folder / "log")
        subprocess.run(
            _as_owner([str(_bin() / "pg_ctl"), "-D", data, "-l", log, *args]), check=True
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-w", "-o", options, "start")

    def halt(self) -> None:
        """Stop at once, as in a crash or a failover: every connection is cut. The cluster
        stays, for `start` to bring back."""
        self._ctl("-w", "-m", "immediate", "stop")

    def restart(self) -> None:
        self.halt()
        self.start()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_private_postgres() -> PrivatePostgres:
    # Not under pytest's tmp_path: its folders are the test user's alone (0700).
    folder = Path(tempfile.mkdtemp(prefix="respond-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    initdb = [str(_bin() / "initdb"), "-D", str(folder / "data"), "-U", "postgres"]
    subprocess.run(_as_owner([*initdb, "-A", "trust"]), check=True, capture_output=True)
    server = PrivatePostgres(folder, free_port())
    server.start()
    return server
