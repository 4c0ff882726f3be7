"""The embedded engine on a GPU (#33), on a machine that has one, with llama-cpp-python built
for it (`make install LLAMA_BACKEND=cuda`; `make gpu` runs this file). CI has no GPU, so this
is not part of `make test`; the RPC device of tests/e2e/test_placement.py proves the same views
there. The bundled model, its 31 layers on the GPU (every layer is the default on a GPU build),
on the real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from respond.engines.llamacpp._devices import Device, devices
from tests.support.metrics import scrape, value
from tests.support.placement import (
    MODEL,
    answers_and_streams,
    ask,
    comes_back_from_the_prompt_cache,
    quantized_cells_restored_as_read_afresh,
    requests_share_the_slots,
)
from tests.support.server import Server, start_server

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def gpu() -> Device:
    offloading = [device for device in devices() if device.offloads]
    assert offloading, "this llama.cpp build has no GPU: make install LLAMA_BACKEND=cuda"
    return offloading[0]


@pytest.fixture(scope="module")
def on_gpu(tmp_path_factory: pytest.TempPathFactory, gpu: Device) -> Iterator[Server]:
    server = start_server(
        tmp_path_factory.mktemp("on-gpu"),
        "-fa", "on", "--parallel", "4", "--cache-ram", "256", "--embedding-model", "none",
    )  # fmt: skip
    yield server
    server.stop()


def test_every_layer_is_on_the_gpu_by_default_and_every_view_says_so(
    on_gpu: Server, gpu: Device
) -> None:
    placement = httpx.get(f"{on_gpu.base_url}/models").json()["data"][0]["meta"]["placement"]
    assert placement["layers"] == f"31/31 layers on {gpu.name}"
    assert placement["n_gpu_layers"] == 31
    [device] = placement["devices"]
    assert device["name"] == gpu.name and device["description"] == gpu.description
    assert 0 < device["memory_free_mib"] <= device["memory_total_mib"]
    health = httpx.get(f"{on_gpu.url}/health").json()
    assert health["models"][MODEL]["layers"] == f"31/31 layers on {gpu.name}"
    assert f"31/31 layers on {gpu.name}, KV f16/f16, flash attention on" in on_gpu.log()
    total = value(scrape(on_gpu.url), "respond_device_memory_bytes", model=MODEL,
                  device=gpu.name, kind="total")  # fmt: skip
    assert total == device["memory_total_mib"] * MIB


def test_it_answers_and_streams(on_gpu: Server) -> None:
    answers_and_streams(on_gpu)


def test_eight_requests_share_four_slots(on_gpu: Server) -> None:
    requests_share_the_slots(on_gpu, 8)


def test_a_conversation_comes_back_from_the_prompt_cache(on_gpu: Server) -> None:
    """Six conversations on four slots: the first one's cells leave the GPU for the host's
    prompt cache and are restored onto it for its next turn."""
    comes_back_from_the_prompt_cache(on_gpu, ["rivers", "castles", "comets", "deserts", "violins"])


def test_quantized_kv_cells_restored_give_the_logits_of_a_fresh_read(
    tmp_path: Path, gpu: Device
) -> None:
    """-ctk q8_0 -ctv q8_0 -fa on, on the GPU: a conversation whose cells were saved to the
    prompt cache and restored continues with the logprobs of one read afresh."""
    placed = f"31/31 layers on {gpu.name}, KV q8_0/q8_0, flash attention on"
    quantized_cells_restored_as_read_afresh(tmp_path, placed, "--embedding-model", "none")


def test_the_gpu_answers_as_the_cpu_does(tmp_path: Path, gpu: Device) -> None:
    """The same greedy question on every layer on the GPU and on none: the same first words,
    with the same confidence (the kernels differ, so not to the last bit)."""
    body = {"include": ["message.output_text.logprobs"], "max_output_tokens": 6}
    answers = {}
    for name, layers in (("gpu", "99"), ("cpu", "0")):
        server = start_server(tmp_path / name, "-ngl", layers, "--embedding-model", "none")
        try:
            answer = ask(server, "What is the capital of France?", **body)
        finally:
            server.stop()
        answers[name] = answer["output"][0]["content"][0]["logprobs"][:4]
    gpu_tokens, cpu_tokens = ([t["token"] for t in answers[n]] for n in ("gpu", "cpu"))
    assert gpu_tokens == cpu_tokens, answers
    for mine, other in zip(answers["gpu"], answers["cpu"], strict=True):
        assert mine["logprob"] == pytest.approx(other["logprob"], abs=0.05), answers
