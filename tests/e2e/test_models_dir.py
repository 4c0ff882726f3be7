"""A folder of models served on demand (#34): `--models-dir` with three copies of the bundled
model (links to it) and one file that is no GGUF, at most two loaded (`--models-max 2`), on the
real server: each answers on first use, the least recently used idle one makes room, none is
unloaded while it streams, concurrent first requests load once, the states show in /v1/models,
llama-server's /models/load and /models/unload, and the idle TTL."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respond.engines.llamacpp import bundled_model_path
from tests.support.mmproj import write_mmproj
from tests.support.server import Server, start_server

TIMEOUT = 300  # a loaded two-core machine is slow; never a timed assertion
MODELS = ("alpha", "beta", "gamma")


def folder(tmp: Path) -> Path:
    models = tmp / "models"
    models.mkdir()
    for name in MODELS:
        (models / f"{name}.gguf").symlink_to(bundled_model_path())
    (models / "broken.gguf").write_text("not a GGUF")
    write_mmproj(models / "mmproj-alpha-F32.gguf")  # alpha's projector: not a chat model
    return models


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("models-dir")
    running = start_server(
        tmp, "--models-dir", str(folder(tmp)), "--models-max", "2", "--parallel", "2",
        "--embedding-model", "none",
    )  # fmt: skip
    yield running
    running.stop()


def states(server: Server) -> dict[str, str]:
    models = httpx.get(f"{server.base_url}/models", timeout=30).json()["data"]
    return {m["id"]: m["meta"]["state"] for m in models}


def ask(server: Server, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "input": "Say hi.", "max_output_tokens": 4, **extra}
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=TIMEOUT)


def loads(server: Server, model: str) -> int:
    return server.log().count(f"'{model}' loaded on demand")


def admin(server: Server, action: str, model: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{action}", json={"model": model}, timeout=TIMEOUT)


def test_every_model_of_the_folder_is_listed_unloaded(server: Server) -> None:
    assert states(server) == dict.fromkeys(("alpha", "beta", "broken", "gamma"), "unloaded")
    models = httpx.get(f"{server.base_url}/models", timeout=30).json()["data"]
    # The projector named after alpha is alpha's: it reads images.
    assert {m["id"]: m["meta"]["vision"] for m in models} == {
        "alpha": True, "beta": False, "broken": False, "gamma": False
    }  # fmt: skip
    assert "--models-dir" in server.log() and "4 models, loaded on demand" in server.log()


def test_each_answers_on_first_use_and_the_least_recently_used_makes_room(server: Server) -> None:
    for model in MODELS:
        reply = ask(server, model)
        assert reply.status_code == 200, reply.text
        assert reply.json()["model"] == model
    assert states(server) == {
        "alpha": "unloaded", "beta": "loaded", "gamma": "loaded", "broken": "unloaded"
    }  # fmt: skip
    assert "'alpha' unloaded (to make room)" in server.log()


def test_a_model_answering_a_stream_is_never_the_one_unloaded(server: Server) -> None:
    """beta is the least recently used, but it streams: gamma makes room for alpha."""
    first_delta = threading.Event()
    events: list[str] = []

    def stream() -> None:
        body = {"model": "beta", "input": "Count to fifty.", "max_output_tokens": 120}
        body |= {"stream": True, "temperature": 0}
        with httpx.stream(
            "POST", f"{server.base_url}/responses", json=body, timeout=TIMEOUT
        ) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:])["type"])
                    if events[-1] == "response.output_text.delta":
                        first_delta.set()

    streaming = threading.Thread(target=stream)
    streaming.start()
    assert first_delta.wait(TIMEOUT)
    assert ask(server, "alpha").status_code == 200
    streaming.join()
    assert events[-1] in ("response.completed", "response.incomplete")
    assert states(server)["gamma"] == "unloaded"
    assert states(server)["beta"] == "loaded" and states(server)["alpha"] == "loaded"


def test_requests_that_arrive_together_load_the_model_once(server: Server) -> None:
    assert states(server)["gamma"] == "unloaded"
    before = loads(server, "gamma")
    replies: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: replies.append(ask(server, "gamma"))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in replies] == [200, 200, 200]
    assert loads(server, "gamma") == before + 1


def test_a_file_that_cannot_load_is_an_error_naming_it(server: Server) -> None:
    reply = ask(server, "broken")
    assert reply.status_code == 503
    error = reply.json()["error"]
    assert error["code"] == "model_load_failed"
    assert "broken.gguf" in error["message"]
    assert states(server)["broken"] == "unloaded"
    assert ask(server, "alpha").status_code == 200  # the others are unaffected


def test_models_load_and_unload_by_hand(server: Server) -> None:
    unloaded = admin(server, "unload", "alpha")
    assert unloaded.status_code == 200
    assert unloaded.json() == {"success": True, "model": "alpha", "state": "unloaded"}
    assert admin(server, "load", "alpha").json()["state"] == "loaded"
    assert states(server)["alpha"] == "loaded"
    missing = admin(server, "load", "zeta")
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "model"
    wrong = httpx.post(f"{server.url}/models/load", json={"name": "alpha"}, timeout=30)
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "model"


def test_an_idle_model_is_unloaded_after_the_ttl(tmp_path: Path) -> None:
    server = start_server(
        tmp_path, "--models-dir", str(folder(tmp_path)), "--models-ttl", "2",
        "--embedding-model", "none",
    )  # fmt: skip
    try:
        assert ask(server, "alpha").status_code == 200
        deadline = time.monotonic() + TIMEOUT
        # The state turns first; the line is written once the memory is freed.
        while not re.search(r"'alpha' unloaded \(idle for 2s\)", server.log()):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert states(server)["alpha"] == "unloaded"
    finally:
        server.stop()
