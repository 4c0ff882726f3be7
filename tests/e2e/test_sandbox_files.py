"""What model-written code leaves in /mnt/data cannot be turned against the server, and
what lands on the host is what the limits say (issue #32, items 1-3 and 8's folders).

Both sandbox modes, each a respond server of its own (`build_server` with
--code-interpreter, the real sandbox, its SQLite store) over real HTTP in this process; the
code is written by the scripted engine. Left in /mnt/data: links to a secret outside the
container, a file swapped for such a link, a link an upload then names, FIFOs and a socket,
hard links and sparse files over the disk limit, 20,000 folders, a dozen sparse images.
Each must be dropped or cut, the call's output must say so, the server must log it, and
the container must go on running code.
"""

from __future__ import annotations

import base64
import logging
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from respond import Settings, build_server
from respond.containers import MAX_ENTRIES, MAX_IMAGES, MAX_IMAGES_BYTES
from respond.testing import ScriptedEngine
from tests.support.clients import openai_client
from tests.support.code_calls import call_logs as logs
from tests.support.code_calls import run_code as forced_call
from tests.support.inproc import serving_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

SECRET = "the-host-secret-0123456789"
DISK_MB = 16
MiB = 1 << 20
ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Served:
    mode: str
    url: str
    engine: ScriptedEngine
    data_dir: Path
    client: openai.OpenAI
    secret: Path  # a 0600 file outside every container


@pytest.fixture(scope="module", params=["namespaces", "limits-only"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    mode = request.param
    base = Path(tmp_path_factory.mktemp(f"sandbox-files-{mode}"))
    secret = base / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    secret.chmod(0o600)
    engine = ScriptedEngine()
    settings = Settings(
        data_dir=base / "data",
        embedding_model="none",
        code_interpreter=True,
        code_interpreter_sandbox=mode,
        # As root the code runs as nobody, who cannot run an interpreter under /root.
        code_interpreter_python="/usr/bin/python3" if ROOT else sys.executable,
        code_interpreter_timeout=20,
        code_interpreter_cpu=30,
        code_interpreter_disk_mb=DISK_MB,
        code_interpreter_processes=64,
    )
    server = build_server(settings, engines={engine.info.id: engine}, banner=False)
    with serving_server(server) as url, openai_client(f"{url}/v1") as client:
        yield Served(mode, url, engine, base / "data", client, secret)


def run_code(served: Served, code: str, container: str) -> Any:
    """One response whose forced call runs `code` in `container`; its call item."""
    return forced_call(served.client, served.engine, code, container)


def container(served: Served) -> str:
    return served.client.containers.create(name="probe").id


def folder(served: Served, container_id: str) -> Path:
    return served.data_dir / "containers" / container_id


def on_host(path: Path) -> list[tuple[Path, os.stat_result]]:
    """Everything under `path` on the host, links not followed."""
    found = []
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = Path(dirpath) / name
            found.append((entry, entry.lstat()))
    return found


def files_of(served: Served, container_id: str) -> dict[str, Any]:
    return {f.path: f for f in served.client.containers.files.list(container_id)}


def content(served: Served, container_id: str, file_id: str) -> httpx.Response:
    url = f"{served.url}/v1/containers/{container_id}/files/{file_id}/content"
    return httpx.get(url, timeout=10)


def still_runs_code(served: Served, container_id: str) -> None:
    """The container runs code after whatever was cut."""
    assert logs(run_code(served, "print(6 * 7)", container_id)).strip() == "42"


def test_links_to_files_outside_are_dropped_and_never_read(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """A link the code leaves (to a 0600 root file, to /etc), and a container file swapped
    for one after it was listed: never a container file, never read through."""
    made = container(served)
    first = run_code(served, "open('f', 'w').write('mine')", made)
    mine = files_of(served, made)["/mnt/data/f"]
    with caplog.at_level(logging.WARNING, logger="respond.containers"):
        call = run_code(
            served,
            f"import os\nos.symlink({str(served.secret)!r}, 'key')\nos.symlink('/etc', 'etc')\n"
            f"os.remove('f')\nos.symlink({str(served.secret)!r}, 'f')",
            made,
        )
    assert first.container_id == call.container_id == made
    assert "[3 entries in /mnt/data were not kept: links, FIFOs, sockets and devices" in logs(call)
    assert any(made in r.getMessage() and "3 links" in r.getMessage() for r in caplog.records)
    assert files_of(served, made) == {}
    assert content(served, made, mine.id).status_code == 404
    assert not [p for p, info in on_host(folder(served, made)) if stat.S_ISLNK(info.st_mode)]
    assert served.secret.read_text() == SECRET
    still_runs_code(served, made)


def test_an_upload_named_as_a_link_replaces_the_link(served: Served) -> None:
    """Uploading a container file under the name of a link the code made writes the file,
    not what the link names."""
    victim = served.secret.with_name("victim")
    victim.write_text("original")
    made = container(served)
    run_code(served, f"import os\nos.symlink({str(victim)!r}, 'up.txt')", made)
    uploaded = served.client.containers.files.create(made, file=("up.txt", b"uploaded"))
    assert victim.read_text() == "original"
    assert content(served, made, uploaded.id).content == b"uploaded"
    assert stat.S_ISREG((folder(served, made) / "up.txt").lstat().st_mode)


def test_fifos_and_sockets_are_not_container_files(served: Served) -> None:
    """Eight FIFOs and a socket: none listed (a GET on a FIFO would hang a server thread),
    none on the host, and the server answers every container route."""
    made = container(served)
    code = (
        "import os, socket\nfor n in range(8):\n    os.mkfifo(f'pipe{n}')\n"
        "socket.socket(socket.AF_UNIX).bind('sock')\nopen('plain.txt', 'w').write('x')"
    )
    call = run_code(served, code, made)
    assert "[9 entries in /mnt/data were not kept" in logs(call)
    listed = files_of(served, made)
    assert set(listed) == {"/mnt/data/plain.txt"}
    for file in listed.values():
        assert content(served, made, file.id).content == b"x"
    kinds = [info.st_mode for _, info in on_host(folder(served, made))]
    assert all(stat.S_ISREG(m) or stat.S_ISDIR(m) for m in kinds)
    still_runs_code(served, made)


def test_hard_links_count_once_per_copy(served: Served) -> None:
    """A 6 MiB file and 7 hard links to it (6 MiB in the sandbox, 48 MiB copied out): what
    lands on the host is within the 16 MiB disk limit."""
    made = container(served)
    code = (
        "import os\nopen('a', 'wb').write(b'x' * (6 << 20))\n"
        "for n in range(7):\n    os.link('a', f'link{n}')"
    )
    call = run_code(served, code, made)
    sizes = [
        info.st_size for _, info in on_host(folder(served, made)) if stat.S_ISREG(info.st_mode)
    ]
    assert len(sizes) == 2 and sum(sizes) <= DISK_MB * MiB
    assert "[Not kept: 6 files (36.0 MiB) and 0 folders." in logs(call)
    assert sum(f.bytes for f in files_of(served, made).values()) == 12 * MiB
    still_runs_code(served, made)


def test_sparse_files_count_their_apparent_size(served: Served) -> None:
    """Eight sparse 16 MiB files (nothing in the sandbox's tmpfs, 128 MiB copied out) under
    a 16 MiB limit: what the container held first, the rest cut; it still runs code."""
    made = container(served)
    run_code(served, "open('kept.txt', 'w').write('kept')", made)
    code = (
        "for n in range(8):\n    with open(f'sparse{n}', 'wb') as out:\n"
        "        out.truncate(16 << 20)"
    )
    call = run_code(served, code, made)
    regular = [(p, info) for p, info in on_host(folder(served, made)) if stat.S_ISREG(info.st_mode)]
    assert sum(info.st_size for _, info in regular) <= DISK_MB * MiB
    said = logs(call)
    assert "[Not kept: 8 files (128.0 MiB)" in said and "16 MiB in all (apparent sizes" in said
    assert (folder(served, made) / "kept.txt").read_text() == "kept"
    still_runs_code(served, made)


def test_folders_count_against_the_copy_back_limit(served: Served) -> None:
    """20,000 folders (made in a blink) are cut to the 1,000 entries a call keeps."""
    made = container(served)
    run_code(served, "open('kept.txt', 'w').write('kept')", made)
    call = run_code(served, "import os\nfor n in range(20000):\n    os.mkdir(f'd{n}')", made)
    assert len(on_host(folder(served, made))) == MAX_ENTRIES
    assert f"[Not kept: 0 files (0 bytes) and {20000 - MAX_ENTRIES + 1} folders." in logs(call)
    assert (folder(served, made) / "kept.txt").read_text() == "kept"
    still_runs_code(served, made)


def test_images_shown_by_one_call_are_capped(served: Served) -> None:
    """A dozen sparse 1 MiB .png files: at most 10 images, 8 MiB in all, in the call's
    outputs; the rest stay container files, and the output says so."""
    made = container(served)
    code = (
        "for n in range(12):\n    with open(f'img{n:02}.png', 'wb') as out:\n"
        "        out.truncate(1 << 20)"
    )
    call = run_code(served, code, made)
    images = [o.url for o in call.outputs or [] if o.type == "image"]
    shown = sum(len(base64.b64decode(url.split(",", 1)[1])) for url in images)
    assert len(images) <= MAX_IMAGES and shown <= MAX_IMAGES_BYTES
    assert len(images) == 8
    assert "[4 images not shown: a call shows at most 10 images, 8 MiB in all." in logs(call)
    assert len(files_of(served, made)) == 12


def test_code_cannot_read_another_containers_folder(served: Served) -> None:
    """The code of one container cannot reach another's folder on the host (limits-only
    runs the code in the host's tree, as nobody; namespaces has no host tree at all)."""
    if served.mode == "limits-only" and not ROOT:
        pytest.skip("limits-only as respond's own user: the code reads what respond reads")
    other = container(served)
    run_code(served, f"open('private.txt', 'w').write({SECRET!r})", other)
    made = container(served)
    paths = [f"../{other}", f"../{other}/private.txt", f"{folder(served, other)}/private.txt"]
    code = (
        f"import os\ntry:\n    print(os.listdir('..'))\nexcept OSError as exc:\n"
        f"    print('not listed:', type(exc).__name__)\nfor path in {paths!r}:\n"
        "    try:\n        print(open(path).read() if path.endswith('.txt') "
        "else os.listdir(path))\n"
        "    except OSError as exc:\n        print('blocked:', type(exc).__name__)"
    )
    said = logs(run_code(served, code, made))
    assert SECRET not in said and other not in said, said
    assert said.count("blocked:") == 3, said
