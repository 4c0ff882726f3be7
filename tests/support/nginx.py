"""A real nginx (Debian's package, `make nginx`) in front of respond replicas, configured
with the server block of docs/deploy.md exactly as written, addresses aside."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from tests.support import processes
from tests.support.server import Server, free_port, wait_ok

NGINX = Path("/usr/sbin/nginx")
DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
_SERVER_LINE = re.compile(r"^(\s*)server 10\.0\.0\.\d+:8080( .*;)$", re.M)


def deploy_block() -> str:
    """The ```nginx block of docs/deploy.md."""
    (block,) = re.findall(r"```nginx\n(.*?)```", DEPLOY_DOC.read_text(), re.S)
    return str(block)


def start_nginx(tmp: Path, backends: Sequence[Server]) -> Server:
    """nginx on a free port, balancing over `backends` with docs/deploy.md's block."""
    if not NGINX.is_file():
        raise RuntimeError(f"{NGINX} is missing: `make nginx` installs it")
    block = deploy_block()
    template = _SERVER_LINE.search(block)
    assert template is not None, "docs/deploy.md's upstream lists no server lines"
    # The doc's server lines become one line per backend, with the doc's own parameters.
    ours = "\n".join(f"{template[1]}server 127.0.0.1:{b.port}{template[2]}" for b in backends)
    block = block.replace(template[0], "\0", 1)
    block = _SERVER_LINE.sub("", block).replace("\0", ours)
    block = re.sub(r"\n\s*\n(\s*keepalive)", r"\n\1", block)  # the removed lines' gap
    port = free_port()
    block = block.replace("listen 80;", f"listen 127.0.0.1:{port};")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "respond.conf").write_text(block)
    # As root, nginx's workers would drop to `nobody`, who cannot write the test's tmp.
    user = "user root;\n" if os.getuid() == 0 else ""
    main = f"""{user}daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{}}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    include {tmp}/respond.conf;
}}
"""
    (tmp / "nginx.conf").write_text(main)
    log_path = tmp / "nginx.log"
    with log_path.open("wb") as log:
        process = processes.spawn(
            [str(NGINX), "-p", str(tmp), "-c", str(tmp / "nginx.conf")], log=log
        )
    server = Server(process, port, log_path)
    wait_ok(server, f"{server.url}/health")
    return server
