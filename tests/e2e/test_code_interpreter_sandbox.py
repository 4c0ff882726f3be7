"""The code_interpreter sandbox against a committed list of escape attempts.

The server is respond's own (`build_server` with --code-interpreter, the real sandbox, its
SQLite store) served over real HTTP in this process; the code is written by the FAKE
scripted engine, since no real model writes a given program on demand. Each attempt must
fail cleanly: the call's output says what stopped it, the server keeps serving (this test
process is the server: an attempt that killed it would end the run), and no process of the
sandbox is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseCodeInterpreterToolCall, ResponseOutputMessage
from openai.types.responses.response_output_text import AnnotationContainerFileCitation

from respond import Settings, build_server
from respond.containers import Limits, Sandbox
from respond.engines import (
    Finish,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.testing import ScriptedEngine
from tests.support.clients import openai_client
from tests.support.code_calls import call_logs as logs
from tests.support.code_calls import run_code as forced_call
from tests.support.inproc import serving_server

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = pytest.mark.sandbox

SECRET = "do-not-leak-this-secret-key"
TIMEOUT_S = 4.0  # the sandbox's wall-clock limit here: the endless attempts end in seconds
DISK_MB = 16


@dataclass(frozen=True)
class Served:
    url: str
    engine: ScriptedEngine
    data_dir: Path
    client: openai.OpenAI


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = Path(tmp_path_factory.mktemp("sandbox")) / "data"
    os.environ["RESPOND_TEST_SANDBOX_SECRET"] = SECRET  # in the server's environment
    engine = ScriptedEngine()
    settings = Settings(
        data_dir=data_dir,
        secret_key=SECRET,
        embedding_model="none",
        code_interpreter=True,
        code_interpreter_timeout=TIMEOUT_S,
        code_interpreter_cpu=30,
        code_interpreter_disk_mb=DISK_MB,
        code_interpreter_processes=16,
    )
    server = build_server(settings, engines={engine.info.id: engine}, banner=False)
    try:
        with serving_server(server) as url, openai_client(f"{url}/v1") as client:
            yield Served(url, engine, data_dir, client)
    finally:
        os.environ.pop("RESPOND_TEST_SANDBOX_SECRET", None)


def run_code(served: Served, code: str) -> Any:
    """One response whose forced call runs `code`; the code_interpreter_call item."""
    return forced_call(served.client, served.engine, code, {"type": "auto"})


def sandboxed() -> set[int]:
    """The processes now living in a nested PID namespace (as every sandbox's do)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and len(line.split()) > 2:
                found.add(int(entry.name))
    return found


# The escape attempts: (name, code, what the call's output must say). `{port}`, `{data}`,
# `{pid}` and `{db}` are the server's port, data dir, process id and SQLite file.
ESCAPES = [
    (
        "connect to PostgreSQL on 127.0.0.1:5432",
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 5432), timeout=3)\n"
        "    print('CONNECTED')\nexcept OSError as exc:\n    print('blocked:', exc)",
        "Network is unreachable",
    ),
    (
        "connect to respond's own port",
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    print('CONNECTED')\nexcept OSError as exc:\n    print('blocked:', exc)",
        "Network is unreachable",
    ),
    (
        "reach the internet",
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
        "    print('CONNECTED')\nexcept OSError as exc:\n    print('blocked:', exc)",
        "Network is unreachable",
    ),
    (
        "list the server's data dir",
        "import os\ntry:\n    print(os.listdir('{data}'))\nexcept OSError as exc:\n"
        "    print('blocked:', exc)",
        "No such file or directory",
    ),
    (
        "read the SQLite file",
        "try:\n    print(open('{db}', 'rb').read(64))\nexcept OSError as exc:\n"
        "    print('blocked:', exc)",
        "No such file or directory",
    ),
    (
        "read the secret key file",
        "try:\n    print(open('{data}/secret.key').read())\nexcept OSError as exc:\n"
        "    print('blocked:', exc)",
        "No such file or directory",
    ),
    (
        "read the environment and the server's /proc environ",
        "import os\nprint('env:', dict(os.environ))\ntry:\n"
        "    print(open('/proc/{pid}/environ', 'rb').read())\nexcept OSError as exc:\n"
        "    print('blocked:', exc)",
        "blocked: [Errno 2]",
    ),
    (
        # Only the interpreter's installation is bound in (here a .venv in the checkout).
        "read the checkout of respond",
        "import os\nprint('exists:', os.path.exists('{checkout}/pyproject.toml'))\n"
        "print(os.listdir('{checkout}'))",
        "exists: False\n['.venv']",
    ),
    (
        "a fork bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "time limit",
    ),
    (
        "write one endless file",
        "try:\n    with open('/mnt/data/fill', 'wb') as out:\n        while True:\n"
        "            out.write(b'x' * (1 << 20))\nexcept OSError as exc:\n"
        "    print('stopped:', exc)",
        "File too large",
    ),
    (
        "fill the disk with many files",
        "import itertools\ntry:\n    for n in itertools.count():\n"
        "        open(f'/tmp/fill{n}', 'wb').write(b'x' * (1 << 20))\n"
        "except OSError as exc:\n    print('stopped:', exc)",
        "No space left on device",
    ),
    ("an endless loop", "while True:\n    pass", "time limit"),
    (
        "allocate 10 GB",
        "try:\n    block = bytearray(10 * 1024 ** 3)\n    print('ALLOCATED')\n"
        "except MemoryError:\n    print('MemoryError')",
        "MemoryError",
    ),
    (
        "kill the parent and the server",
        "import os, signal\nfor pid in (os.getppid(), {pid}):\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n        print('sent to', pid)\n"
        "    except OSError as exc:\n        print('blocked:', pid, exc)\n"
        "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as exc:\n"
        "    print('everyone:', exc)",
        "blocked: {pid} [Errno 3] No such process",
    ),
]


def placed(served: Served, text: str) -> str:
    return (
        text.replace("{port}", str(httpx.URL(served.url).port))
        .replace("{data}", str(served.data_dir))
        .replace("{db}", str(served.data_dir / "respond.sqlite3"))
        .replace("{pid}", str(os.getpid()))
        .replace("{checkout}", str(Path.cwd()))
    )


@pytest.mark.parametrize(("name", "code", "says"), ESCAPES, ids=[e[0] for e in ESCAPES])
def test_an_escape_attempt_fails_cleanly(served: Served, name: str, code: str, says: str) -> None:
    before = sandboxed()
    call = run_code(served, placed(served, code))
    said = logs(call)
    assert placed(served, says) in said, (name, said)
    assert "CONNECTED" not in said and "ALLOCATED" not in said
    assert SECRET not in said
    assert sandboxed() <= before, "a sandboxed process was left behind"
    health = httpx.get(f"{served.url}/health", timeout=10)
    assert health.status_code == 200  # the server keeps serving
    assert logs(run_code(served, "print(6 * 7)")).strip() == "42"  # and running code


def test_a_stopped_call_fails_and_a_finished_one_completes(served: Served) -> None:
    assert run_code(served, "while True:\n    pass").status == "failed"
    assert run_code(served, "raise ValueError('mine')").status == "completed"
    assert "ValueError: mine" in logs(run_code(served, "raise ValueError('mine')"))


def test_the_disk_limit_bounds_what_a_call_leaves_in_the_container(served: Served) -> None:
    call = run_code(served, "open('/mnt/data/a.txt', 'w').write('kept')")
    folder = served.data_dir / "containers" / call.container_id
    assert (folder / "a.txt").read_text() == "kept"
    filled = run_code(served, "open('/mnt/data/fill', 'wb').write(b'x' * (64 << 20))")
    assert "File too large" in logs(filled)
    folder = served.data_dir / "containers" / filled.container_id
    assert sum(p.stat().st_size for p in folder.rglob("*")) <= DISK_MB * 2**20


def test_links_the_code_leaves_are_not_followed_back_out(served: Served) -> None:
    """A link in /mnt/data to a path outside (the server's secret key) is never copied
    back as that file's contents."""
    target = served.data_dir / "secret.key"
    code = f"import os\nos.symlink('{target}', '/mnt/data/key')\nos.mkfifo('/mnt/data/p')"
    call = run_code(served, code)
    folder = served.data_dir / "containers" / call.container_id
    assert not (folder / "key").exists() and not (folder / "p").exists()


PNG = (
    "import base64\nopen('/mnt/data/dot.png', 'wb').write(base64.b64decode("
    "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='))"
)


def test_files_the_code_writes_become_container_files_the_answer_cites(served: Served) -> None:
    engine = served.engine
    code = "open('/mnt/data/sums.csv', 'w').write('n,sum\\n3,6\\n')\n" + PNG
    engine.enqueue(
        ToolCallStart(call_id="call_1", name="python"),
        ToolCallArgumentsDelta(json.dumps({"code": code})),
        ToolCallEnd(),
        Usage(1, 1),
        Finish("stop"),
    )
    engine.enqueue(TextDelta("See sums.csv."), Usage(1, 1), Finish("stop"))
    response = served.client.responses.create(
        model=engine.info.id,
        input="Sum it.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        tool_choice={"type": "code_interpreter"},
        include=["code_interpreter_call.outputs"],
    )
    call, answer = response.output
    assert isinstance(call, ResponseCodeInterpreterToolCall)
    assert isinstance(answer, ResponseOutputMessage)
    images = [o for o in call.outputs or [] if o.type == "image"]
    assert len(images) == 1 and images[0].url.startswith("data:image/png;base64,iVBOR")
    files = {f.path: f for f in served.client.containers.files.list(call.container_id)}
    assert set(files) == {"/mnt/data/sums.csv", "/mnt/data/dot.png"}
    sums = files["/mnt/data/sums.csv"]
    assert (sums.source, sums.bytes) == ("assistant", 10)
    content = served.client.containers.files.content.retrieve(
        sums.id, container_id=call.container_id
    )
    assert content.read() == b"n,sum\n3,6\n"
    part = answer.content[0]
    assert part.type == "output_text"
    notes = {
        n.file_id: n for n in part.annotations if isinstance(n, AnnotationContainerFileCitation)
    }
    assert set(notes) == {f.id for f in files.values()} and len(part.annotations) == 2
    cited = notes[sums.id]
    assert cited.container_id == call.container_id
    assert (cited.filename, cited.start_index, cited.end_index) == ("sums.csv", 4, 12)
    # A later call in the same container sees the files, and what it removes goes.
    engine.enqueue(
        ToolCallStart(call_id="call_2", name="python"),
        ToolCallArgumentsDelta(
            json.dumps({"code": "import os\nos.remove('dot.png')\nprint(sorted(os.listdir()))"})
        ),
        ToolCallEnd(),
        Usage(1, 1),
        Finish("stop"),
    )
    engine.enqueue(TextDelta("Removed."), Usage(1, 1), Finish("stop"))
    again = served.client.responses.create(
        model=engine.info.id,
        input="Clean up.",
        previous_response_id=response.id,
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        tool_choice={"type": "code_interpreter"},
        include=["code_interpreter_call.outputs"],
    )
    second = again.output[0]
    assert isinstance(second, ResponseCodeInterpreterToolCall)
    assert second.container_id == call.container_id  # the chain's container, reused
    assert logs(second) == "['sums.csv']\n"
    left = [f.path for f in served.client.containers.files.list(call.container_id)]
    assert left == ["/mnt/data/sums.csv"]
    # The model saw the first call and its output again (replayed from the chain).
    replayed = engine.turns[-2].messages
    assert any(m.role == "tool" and "[An image was shown.]" in m.content for m in replayed)


async def test_limits_only_runs_code_in_its_folder_and_kills_what_it_leaves(
    tmp_path: Path,
) -> None:
    """The weaker mode (--code-interpreter-sandbox limits-only): no namespaces, but the
    limits, a scratch copy of the folder, the empty environment and the kill at the time
    limit hold."""
    # As root the code runs as nobody, who cannot run an interpreter under /root.
    python = "/usr/bin/python3" if os.geteuid() == 0 else sys.executable
    limits = Limits(timeout=3, cpu_seconds=30, memory_mb=1024, disk_mb=16, processes=4096)
    sandbox = Sandbox.make("limits-only", limits, tmp_path / "containers", python=python)
    folder = tmp_path / "containers" / "cntr_weak"
    folder.mkdir()
    ran = await sandbox.run(
        "import os\nprint(os.getcwd(), dict(os.environ))\nopen('f', 'w').write('x')", folder
    )
    assert ran.output.split()[0] == f"{folder}.work" and ran.exit_code == 0
    assert (folder / "f").read_text() == "x"
    assert not Path(f"{folder}.work").exists()  # the scratch copy is removed
    ran = await sandbox.run(
        "import subprocess\nsubprocess.Popen(['sleep', '61.25'])\nwhile True:\n    pass", folder
    )
    assert ran.timed_out
    left = [p for p in Path("/proc").glob("[0-9]*") if b"61.25" in _cmdline(p)]
    assert left == [], "the call's process group was not killed"


async def test_an_interpreter_installed_under_tmp_runs_isolated(tmp_path: Path) -> None:
    """A checkout under /tmp has its virtual environment there: bound into the sandbox's
    root after the sandbox's own writable /tmp, which would otherwise hide it (and once
    refused to build the root at all: a CI checkout under /tmp could not start
    --code-interpreter). The code's /tmp holds nothing else of the host's."""
    limits = Limits(timeout=10, cpu_seconds=30, memory_mb=1024, disk_mb=16, processes=64)
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="checkout-") as checkout:
        venv = Path(checkout) / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        sandbox = Sandbox.make("namespaces", limits, tmp_path / "containers", python=python)
        folder = tmp_path / "containers" / "cntr_tmp"
        folder.mkdir()
        code = "import os, sys\nprint(sys.prefix)\nprint(os.listdir('/tmp'))"
        ran = await sandbox.run(code, folder)
    assert ran.exit_code == 0, ran.output
    prefix, listed = ran.output.splitlines()
    assert prefix == str(venv)
    assert listed == str([Path(checkout).name])


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_client_that_disconnects_stops_its_running_call(served: Served) -> None:
    before = sandboxed()
    code = "import time\ntime.sleep(3.5)\nopen('/mnt/data/late', 'w').write('x')"
    served.engine.enqueue(
        ToolCallStart(call_id="call_1", name="python"),
        ToolCallArgumentsDelta(json.dumps({"code": code})),
        ToolCallEnd(),
        Usage(1, 1),
        Finish("stop"),
    )
    body = {
        "model": served.engine.info.id,
        "input": "Run it.",
        "stream": True,
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "tool_choice": {"type": "code_interpreter"},
    }
    container_id = None
    with httpx.stream("POST", f"{served.url}/v1/responses", json=body, timeout=30) as reply:
        lines = reply.iter_lines()  # kept: a closed iterator would close the stream now
        for line in lines:
            if line.startswith("data: ") and "code_interpreter_call" in line:
                event = json.loads(line[len("data: ") :])
                container_id = event.get("item", {}).get("container_id", container_id)
                if event["type"] == "response.code_interpreter_call.interpreting":
                    break
        deadline = time.monotonic() + 3
        while not sandboxed() - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandboxed() - before, "the code never started"
    deadline = time.monotonic() + 2  # well before the code's 3.5 s sleep ends
    while sandboxed() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sandboxed() - before, "the call went on after its client left"
    assert container_id is not None
    assert not (served.data_dir / "containers" / container_id / "late").exists()


def test_calls_in_one_container_run_one_at_a_time(served: Served) -> None:
    """Two responses using one container at once: the second call sees the first's file
    (each call copies the container in and out; run together, one would lose the other's)."""
    made = served.client.containers.create(name="shared")
    code = (
        "import time\nopen('/mnt/data/log', 'a').write('x')\ntime.sleep(1)\n"
        "print(len(open('/mnt/data/log').read()))"
    )
    for _ in range(2):
        served.engine.enqueue(
            ToolCallStart(call_id="call_1", name="python"),
            ToolCallArgumentsDelta(json.dumps({"code": code})),
            ToolCallEnd(),
            Usage(1, 1),
            Finish("stop"),
        )
    for _ in range(2):
        served.engine.enqueue(TextDelta("Done."), Usage(1, 1), Finish("stop"))

    def respond(_: int) -> str:
        response = served.client.responses.create(
            model=served.engine.info.id,
            input="Run it.",
            tools=[{"type": "code_interpreter", "container": made.id}],
            tool_choice={"type": "code_interpreter"},
            include=["code_interpreter_call.outputs"],
        )
        return logs(response.output[0]).strip()

    with ThreadPoolExecutor(2) as pool:
        said = sorted(pool.map(respond, range(2)))
    assert said == ["1", "2"]
    log = served.client.containers.files.list(made.id).data[0]
    content = served.client.containers.files.content.retrieve(log.id, container_id=made.id)
    assert content.read() == b"xx"


DRIVER = """\
import json, os, subprocess, sys
boot, python, folder = sys.argv[1:4]
read, write = os.pipe()
job = {"mode": "namespaces", "python": python, "binds": [], "workdir": folder + "/work",
       "root": folder + "/root", "uid": None, "gid": None,
       "limits": {"cpu": 10, "memory": 1 << 30, "disk": 8 << 20, "processes": 64,
                  "entries": 1000, "depth": 32, "inodes": 10000},
       "timeout": 10.0, "code": sys.stdin.read(), "report": write, "server": os.getpid()}
boot = subprocess.Popen([python, "-I", "-S", boot], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(write,))
os.close(write)
out, _ = boot.communicate(json.dumps(job).encode())
print(json.dumps({"output": out.decode(), "report": json.loads(os.read(read, 65536))}))
"""


def test_a_respond_that_is_not_root_isolates_code_in_a_user_namespace() -> None:
    """The bootstrap as an unprivileged user (nobody, when the tests run as root): a user
    namespace gives it the same network, file and process isolation."""
    root = os.geteuid() == 0
    python = "/usr/bin/python3" if root else sys.executable
    folder = Path(tempfile.mkdtemp(prefix="respond-userns-", dir="/tmp"))
    try:
        for name in ("work", "root"):
            (folder / name).mkdir()
        for module in ("_boot.py", "_tree.py", "_seccomp.py", "_users.py"):  # the boot loads these
            shutil.copy(Path(__file__).parents[2] / "respond" / "containers" / module, folder)
        (folder / "driver.py").write_text(DRIVER)
        if root:
            for path in (folder, *folder.iterdir()):
                os.chown(path, 65534, 65534)
        folder.chmod(0o755)
        command = [python, str(folder / "driver.py"), str(folder / "_boot.py"), python]
        if root:
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        code = (
            "import os, socket\nprint('uid', os.getuid(), os.listdir('/mnt/data'))\n"
            "try:\n    socket.create_connection(('127.0.0.1', 5432), timeout=3)\n"
            "except OSError as exc:\n    print('blocked:', exc)\n"
            "print('sees /tmp of the host:', os.path.exists('" + str(folder) + "'))\n"
            "open('/mnt/data/out.txt', 'w').write('kept')"
        )
        done = subprocess.run(
            [*command, str(folder)], input=code, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        nothing = {"special": 0, "files": 0, "folders": 0, "bytes": 0, "names": []}
        ended = {"exit": 0, "signal": None, "timed_out": False, "dropped": nothing}
        assert result["report"] == ended, result
        said = result["output"]
        assert f"uid {os.geteuid() if not root else 65534} []" in said
        assert "Network is unreachable" in said and "sees /tmp of the host: False" in said
        assert (folder / "work" / "out.txt").read_text() == "kept"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
