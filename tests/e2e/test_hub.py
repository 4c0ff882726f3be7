"""`respond serve -hf OWNER/NAME:QUANT` (#34): the real server fetching the bundled GGUF through
huggingface_hub from a FAKE hub (tests/support/fake_hub.py; huggingface.co cannot be reached
from here) that holds it under two quant names beside an mmproj, HF_ENDPOINT pointed at it and
HF_HOME in the test's folder."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from respond.engines.llamacpp import bundled_model_path
from tests.support.fake_hub import COMMIT, FakeHub, sha256_of
from tests.support.mmproj import write_mmproj
from tests.support.server import Server, start_server

TIMEOUT = 300  # a loaded two-core machine is slow; never a timed assertion
REPO = "owner/tiny"
FILE = "tiny-Q8_0.gguf"
MMPROJ = "mmproj-tiny-F16.gguf"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    mmproj = write_mmproj(tmp_path / "mmproj.gguf")  # loaded with the model: a real one
    model = bundled_model_path()
    files = {"tiny-Q4_K_M.gguf": model, FILE: model, MMPROJ: mmproj, "README.md": mmproj}
    fake = FakeHub(REPO, files).start()
    yield fake
    fake.stop()


def hub_env(tmp: Path, endpoint: str, **more: str) -> dict[str, str]:
    """The server's environment: no HF variable of this machine's, the cache in `tmp`."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("HF_")}
    return {**clean, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp / "hf"), **more}


def cached(tmp: Path, name: str) -> Path:
    return tmp / "hf" / "hub" / "models--owner--tiny" / "snapshots" / COMMIT / name


def serve(tmp: Path, env: dict[str, str], *args: str) -> Server:
    return start_server(tmp, "-hf", f"{REPO}:Q8_0", *args, "--embedding-model", "none", env=env)


def failed_start(tmp: Path, env: dict[str, str], *args: str) -> str:
    """The log of a start that must stop, non-zero, before serving."""
    server = start_server(tmp, *args, "--embedding-model", "none", env=env, wait_ready=False)
    try:
        code = server.process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        server.stop()
        raise AssertionError(f"the server did not stop:\n{server.log()}") from None
    assert code != 0, server.log()
    return server.log()


def answer(server: Server, model: str) -> str:
    body = {"model": model, "input": "Name a fruit.", "max_output_tokens": 8, "temperature": 0}
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=TIMEOUT)
    assert reply.status_code == 200, reply.text
    text: str = reply.json()["output"][0]["content"][0]["text"]
    return text


def test_the_tagged_file_is_fetched_with_progress_served_then_served_from_the_cache(
    tmp_path: Path, hub: FakeHub
) -> None:
    env = hub_env(tmp_path, hub.url)
    server = serve(tmp_path, env)
    try:
        models = httpx.get(f"{server.base_url}/models", timeout=TIMEOUT).json()["data"]
        assert [m["id"] for m in models] == ["tiny-Q8_0"]
        assert models[0]["meta"]["vision"]  # the repo's mmproj, loaded beside it
        assert answer(server, "tiny-Q8_0").strip()
    finally:
        server.stop()
    # The Q8_0 file by its tag, not the Q4_K_M one; the mmproj beside it; progress in the log.
    assert len(hub.downloads(FILE)) == 1 and not hub.downloads("tiny-Q4_K_M.gguf")
    assert len(hub.downloads(MMPROJ)) == 1 and not hub.downloads("README.md")
    assert sha256_of(cached(tmp_path, FILE).resolve()) == sha256_of(bundled_model_path())
    assert cached(tmp_path, MMPROJ).is_file()
    log = server.log()
    assert f"{FILE}: 100%" in log
    assert f"mmproj {MMPROJ} from {REPO}" in log
    # With the hub down, gone, or HF_HUB_OFFLINE set, the next starts serve the cached file.
    hub.down = True
    restart(tmp_path / "down", env, "Server error '503 Service Unavailable'")
    hub.stop()
    before = len(hub.requests)
    restart(tmp_path / "gone", env, "the hub cannot be reached")
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    restart(tmp_path / "offline", offline, "HF_HUB_OFFLINE is set")
    assert len(hub.requests) == before
    # A quant the cache does not hold, offline: the error says where it looked.
    log = failed_start(tmp_path / "other", offline, "-hf", f"{REPO}:Q4_K_M")
    folder = tmp_path / "hf" / "hub" / "models--owner--tiny"
    assert f"{REPO} has no GGUF tagged Q4_K_M in the cache ({folder})" in log


def restart(tmp: Path, env: dict[str, str], why: str) -> None:
    server = serve(tmp, env)
    try:
        assert answer(server, "tiny-Q8_0").strip()
    finally:
        server.stop()
    assert why in server.log() and "using the cache" in server.log()


def test_a_config_file_model_from_the_hub_without_a_tag_is_the_q4_k_m_file(
    tmp_path: Path, hub: FakeHub
) -> None:
    config = tmp_path / "respond.toml"
    config.write_text(f'[models.tiny]\nhf = "{REPO}"\nctx_size = 1024\n')
    env = hub_env(tmp_path, hub.url)
    server = start_server(tmp_path, "--config", str(config), "--embedding-model", "none", env=env)
    try:
        assert answer(server, "tiny").strip()
    finally:
        server.stop()
    assert len(hub.downloads("tiny-Q4_K_M.gguf")) == 1 and not hub.downloads(FILE)
    assert cached(tmp_path, "tiny-Q4_K_M.gguf").is_file()


def test_a_private_repo_needs_the_token(tmp_path: Path, hub: FakeHub) -> None:
    hub.token = "hf_secret"
    log = failed_start(tmp_path, hub_env(tmp_path, hub.url), "-hf", f"{REPO}:Q8_0")
    assert f"respond: {REPO}: the hub refused: 401 Client Error. Repository Not Found" in log
    assert "needs a token: --hf-token or HF_TOKEN" in log
    server = serve(tmp_path / "with-token", hub_env(tmp_path, hub.url, HF_TOKEN="hf_secret"))
    server.stop()
    assert len(hub.downloads(FILE)) == 1 and cached(tmp_path, FILE).is_file()


def test_a_download_cut_halfway_is_resumed(tmp_path: Path, hub: FakeHub) -> None:
    half = bundled_model_path().stat().st_size // 2
    hub.cut = half
    server = serve(tmp_path, hub_env(tmp_path, hub.url))
    server.stop()
    first, resumed = hub.downloads(FILE)
    assert first.range is None
    assert resumed.range is not None and resumed.range.startswith("bytes=")
    assert 0 < int(resumed.range.removeprefix("bytes=").rstrip("-")) <= half
    assert sha256_of(cached(tmp_path, FILE).resolve()) == sha256_of(bundled_model_path())


def test_a_corrupted_download_is_refused_and_removed(tmp_path: Path, hub: FakeHub) -> None:
    hub.corrupt.add(FILE)
    log = failed_start(tmp_path, hub_env(tmp_path, hub.url), "-hf", f"{REPO}:Q8_0")
    assert f"respond: {REPO}: {FILE} does not match the hub's checksum" in log
    assert f"sha256 {sha256_of(bundled_model_path())} advertised" in log
    assert not cached(tmp_path, FILE).exists()
    blobs = tmp_path / "hf" / "hub" / "models--owner--tiny" / "blobs"
    assert not (blobs / sha256_of(bundled_model_path())).exists()


@pytest.mark.parametrize(
    ("args", "named", "offline"),
    [
        (["-hf", f"{REPO}:Q8_0"], "a GGUF tagged Q8_0", True),
        (["-hf", REPO, "--hf-file", FILE], FILE, True),
        (["-hf", f"{REPO}:Q8_0"], "a GGUF tagged Q8_0", False),  # the hub does not answer
    ],
)
def test_an_empty_cache_without_the_hub_is_a_clear_error(
    tmp_path: Path, hub: FakeHub, args: list[str], named: str, offline: bool
) -> None:
    hub.stop()
    env = hub_env(tmp_path, hub.url, **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    log = failed_start(tmp_path, env, *args)
    folder = tmp_path / "hf" / "hub" / "models--owner--tiny"
    assert f"respond: {REPO}: {named} is not in the cache ({folder})" in log
    assert ("HF_HUB_OFFLINE is set" in log) == offline
    assert "Start once with the hub reachable" in log
