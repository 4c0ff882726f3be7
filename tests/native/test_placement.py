"""Placement (#33): llama-server's flags read from the command line, the environment and a
model's table, turned into llama.cpp's parameters against this build's real devices, and the
RPC liveness read off a real connection's kernel state. The e2e side (a real rpc-server, a
quantized KV cache) is tests/e2e/test_placement.py."""

from __future__ import annotations

import ctypes
import socket
import time
from pathlib import Path

import pytest

from respond._config import Placement
from respond._config_file import ConfigError, read_config
from respond.cli import parse_settings
from respond.engines.llamacpp import _devices
from respond.engines.llamacpp._placement import (
    Placed,
    PlacementError,
    _BuftOverride,
    _keep_experts_on_cpu,
    place,
)
from respond.engines.llamacpp._rpc import connected

GPU_BUILD = any(device.offloads for device in _devices.devices())


def test_the_flags_are_llama_servers() -> None:
    settings = parse_settings(
        ["serve", "-ngl", "all", "-ncmoe", "4", "-fa", "on", "-ctk", "q8_0", "-ctv", "q4_0",
         "--mlock", "--no-mmap", "-dev", "CUDA0,CUDA1", "-ts", "3,1", "-mg", "1", "-sm", "row",
         "--rpc", "10.0.0.2:50052,gpu-box:50053"],
        environ={},
    )  # fmt: skip
    assert settings.placement == Placement(
        n_gpu_layers=-1,
        n_cpu_moe=4,
        flash_attn="on",
        cache_type_k="q8_0",
        cache_type_v="q4_0",
        mlock=True,
        no_mmap=True,
        devices=("CUDA0", "CUDA1"),
        tensor_split=(3.0, 1.0),
        main_gpu=1,
        split_mode="row",
        rpc=("10.0.0.2:50052", "gpu-box:50053"),
    )
    from_env = parse_settings(["serve"], environ={"RESPOND_N_GPU_LAYERS": "20"})
    assert from_env.placement.n_gpu_layers == 20
    assert parse_settings(["serve"], environ={}).placement == Placement()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["-ngl", "-3"], "an integer >= 0"),
        (["-ctk", "q3_k"], "invalid choice"),
        (["--rpc", "gpu-box"], "use HOST:PORT"),
        (["-ts", "3,x"], "use e.g. 3,1"),
        (["-fa", "yes"], "invalid choice"),
    ],
)
def test_a_wrong_value_is_refused_naming_it(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_settings(["serve", *args], environ={})
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_a_models_table_sets_its_own_placement(tmp_path: Path) -> None:
    config = tmp_path / "respond.toml"
    config.write_text(
        '[models.coder]\ngguf = "bundled"\nn_gpu_layers = 20\ncache_type_k = "q8_0"\n'
        'device = "RPC0"\nmlock = true\n\n[models.small]\ngguf = "bundled"\n'
    )
    coder, small = read_config(config).models
    assert coder.placement == {  # type: ignore[union-attr]
        "n_gpu_layers": 20,
        "cache_type_k": "q8_0",
        "devices": ("RPC0",),
        "mlock": True,
    }
    assert small.placement == {}  # type: ignore[union-attr]
    config.write_text('[models.coder]\ngguf = "bundled"\ncache_type_v = "q3"\n')
    with pytest.raises(ConfigError, match=r"models\.coder\.cache_type_v: invalid choice 'q3'"):
        read_config(config)


def test_layers_asked_of_a_build_without_a_gpu_stop_the_start() -> None:
    if GPU_BUILD:
        assert place(Placement(n_gpu_layers=99)).targets
        return
    with pytest.raises(PlacementError, match=r"-ngl 99: this build of llama.cpp has no GPU"):
        place(Placement(n_gpu_layers=99))
    placed = place(Placement(n_gpu_layers=0, n_cpu_moe=4, tensor_split=(1.0,)))
    assert placed.targets == []
    assert placed.layers(30) == (0, 31)
    assert placed.describe(30)["layers"] == "31/31 layers on CPU"
    assert placed.notes() == [
        "--n-cpu-moe, -ts: no effect, this build of llama.cpp has no GPU (every layer runs on "
        "the CPU; docs/hardware.md)"
    ]


def test_an_unknown_device_is_named_with_the_ones_there_are() -> None:
    with pytest.raises(PlacementError, match=r"-dev CUDA7: no such GPU device in this build"):
        place(Placement(devices=("CUDA7",)))


def test_a_quantized_v_cache_needs_flash_attention() -> None:
    with pytest.raises(PlacementError, match="-ctv q8_0: a quantized V cache needs flash"):
        place(Placement(cache_type_v="q8_0", flash_attn="off"))
    assert place(Placement(cache_type_v="q8_0", flash_attn="auto")).placement.cache_type_v


def test_the_load_mode_and_kv_types_reach_llama_cpps_parameters() -> None:
    placed = place(Placement(no_mmap=True, mlock=True, cache_type_k="q8_0", flash_attn="on"))
    assert placed.model.load_mode == 2  # LLAMA_LOAD_MODE_MLOCK: read in, locked
    assert place(Placement()).model.load_mode == -1  # auto: mmap where devices allow
    import llama_cpp

    context = llama_cpp.llama_context_default_params()
    placed.configure_context(context)
    assert (context.type_k, context.type_v, context.flash_attn_type) == (8, 1, 1)


def test_n_cpu_moe_keeps_the_experts_of_the_first_layers_in_host_memory() -> None:
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    keep: list[object] = []
    _keep_experts_on_cpu(params, 3, keep)
    overrides = ctypes.cast(params.tensor_buft_overrides, ctypes.POINTER(_BuftOverride))
    patterns = [overrides[i].pattern for i in range(4)]
    assert patterns == [
        rb"blk\.0\.ffn_(up|down|gate|gate_up)_(ch|)exps",
        rb"blk\.1\.ffn_(up|down|gate|gate_up)_(ch|)exps",
        rb"blk\.2\.ffn_(up|down|gate|gate_up)_(ch|)exps",
        None,  # the end of the list
    ]
    assert all(overrides[i].buft == _devices.cpu_buffer_type() for i in range(3))


def test_an_rpc_server_that_closes_its_end_is_seen_gone() -> None:
    """The kernel's state of this process's own connection: ESTABLISHED, then CLOSE_WAIT."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        server_side, _ = listener.accept()
        assert connected(f"127.0.0.1:{port}")
        assert connected(f"localhost:{port}")
        server_side.close()
        deadline = time.monotonic() + 5
        while connected(f"127.0.0.1:{port}"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        client.close()
    assert not connected(f"127.0.0.1:{port}")  # no connection at all


def test_placed_describes_rpc_targets_by_name() -> None:
    cpu = _devices.devices()[0]
    placed = Placed(Placement(n_gpu_layers=10), place(Placement()).model, [cpu])
    assert placed.layers(30) == (10, 31)
    described = placed.describe(30)
    assert described["layers"] == f"10/31 layers on {cpu.name}"
    assert described["devices"][0]["memory_total_mib"] > 0


def test_every_placement_choice_given_shows_in_meta() -> None:
    asked = Placement(n_gpu_layers=0, no_mmap=True, mlock=True, split_mode="row", main_gpu=1,
                      tensor_split=(3.0, 1.0), n_cpu_moe=2)  # fmt: skip
    described = place(asked).describe(30)
    assert described | {"layers": ""} == {
        "devices": [], "layers": "", "n_gpu_layers": 0, "cache_type_k": "f16",
        "cache_type_v": "f16", "flash_attn": "auto", "n_cpu_moe": 2, "mlock": True,
        "no_mmap": True, "tensor_split": [3.0, 1.0], "main_gpu": 1, "split_mode": "row",
    }  # fmt: skip
    assert set(place(Placement()).describe(30)) == {
        "devices", "layers", "n_gpu_layers", "cache_type_k", "cache_type_v", "flash_attn"
    }  # fmt: skip
