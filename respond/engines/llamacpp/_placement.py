"""Where the embedded model runs: llama-server's placement flags (-ngl, --n-cpu-moe, -fa,
-ctk/-ctv, --mlock, --no-mmap, -dev, -ts, -mg, -sm, --rpc) as llama.cpp's model and context
parameters, checked against the devices this build has, and what came of them as people
read it (`31/31 layers on CUDA0`). docs/hardware.md is the user's side of this module.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import llama_cpp

from respond._config import Placement
from respond.engines.llamacpp import _devices
from respond.engines.llamacpp._devices import Device

__all__ = ["Placed", "PlacementError", "place"]

# ggml_type of each KV-cache type llama-server accepts (common/arg.cpp's kv_cache_types).
_CACHE_TYPES = {
    "f32": 0,
    "f16": 1,
    "bf16": 30,
    "q8_0": 8,
    "q4_0": 2,
    "q4_1": 3,
    "iq4_nl": 20,
    "q5_0": 6,
    "q5_1": 7,
}
_FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}  # enum llama_flash_attn_type
_SPLIT_MODES = {"none": 0, "layer": 1, "row": 2}  # enum llama_split_mode
# Expert tensors of one layer, as llama.cpp's common/common.h matches them for --n-cpu-moe.
_EXPERTS = r"blk\.{layer}\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_LOAD_MODES = {  # (mmap, mlock) -> enum llama_load_mode
    # AUTO, llama.cpp's default: mmap unless a device cannot take mapped weights (an RPC
    # device: with MMAP forced, its layers' weights would stay in host memory).
    (True, False): -1,
    (False, False): 0,
    (False, True): 2,
    (True, True): 3,
}


class PlacementError(ValueError):
    """A placement this build or machine cannot honour; the message says what to change."""


@dataclass
class Placed:
    """llama.cpp's parameters for one placement, with the C memory they point at (kept alive
    here until the model is loaded), and the devices the layers go to."""

    placement: Placement
    model: Any  # llama_model_params
    targets: list[Device]  # devices holding offloaded layers, in llama.cpp's order
    _keep: list[Any] = field(default_factory=list)

    def configure_context(self, context: Any) -> None:
        """Set the KV-cache types and flash attention on llama_context_params."""
        context.type_k = _CACHE_TYPES[self.placement.cache_type_k]
        context.type_v = _CACHE_TYPES[self.placement.cache_type_v]
        context.flash_attn_type = _FLASH_ATTN[self.placement.flash_attn]

    def layers(self, n_layer: int) -> tuple[int, int]:
        """(offloaded, total) as llama.cpp counts them: the repeating layers and the output
        layer, offloaded only where a device takes them."""
        total = n_layer + 1
        if not self.targets:
            return 0, total
        wanted = self.placement.n_gpu_layers
        return (total if wanted is None or wanted < 0 else min(wanted, total)), total

    def notes(self) -> list[str]:
        """Flags that have no effect here, said rather than silently ignored."""
        placement = self.placement
        if self.targets:
            return []
        ignored = [
            name
            for name, given in (
                ("--n-cpu-moe", placement.n_cpu_moe),
                ("-ts", placement.tensor_split),
                ("-mg", placement.main_gpu),
                ("-sm", placement.split_mode != "layer"),
            )
            if given
        ]
        if not ignored:
            return []
        return [
            f"{', '.join(ignored)}: no effect, this build of llama.cpp has no GPU (every layer "
            "runs on the CPU; docs/hardware.md)"
        ]

    def describe(self, n_layer: int) -> dict[str, Any]:
        """Where the model runs, for the banner, /v1/models' `meta`, /health and the log."""
        offloaded, total = self.layers(n_layer)
        if offloaded:
            where = f"{offloaded}/{total} layers on {', '.join(d.name for d in self.targets)}"
        else:
            where = f"{total}/{total} layers on CPU"
        placement = self.placement
        described: dict[str, Any] = {
            "devices": [_device_entry(d) for d in self.targets] if offloaded else [],
            "layers": where,
            "n_gpu_layers": offloaded,
            "cache_type_k": placement.cache_type_k,
            "cache_type_v": placement.cache_type_v,
            "flash_attn": placement.flash_attn,
        }
        return described | _asked(placement)


def _asked(placement: Placement) -> dict[str, Any]:
    """The other placement choices, where they differ from llama.cpp's defaults: every flag
    given shows in /v1/models' `meta.placement`."""
    default = Placement()
    shown = ("n_cpu_moe", "mlock", "no_mmap", "tensor_split", "main_gpu", "split_mode", "rpc")
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name in shown
        if (value := getattr(placement, name)) != getattr(default, name)
    }


def _device_entry(device: Device) -> dict[str, Any]:
    """A device and its memory as it reported it once the model was loaded (read then, from
    the loading thread: an RPC device's socket is the decode thread's afterwards)."""
    free, total = device.memory()
    entry: dict[str, Any] = {"name": device.name, "description": device.description}
    return entry | {"memory_free_mib": free >> 20, "memory_total_mib": total >> 20}


def place(placement: Placement) -> Placed:
    """llama.cpp's model parameters for `placement`. Raises PlacementError for what the
    build cannot do: an unreachable rpc-server, an unknown device, layers asked of a build
    with nowhere to put them, a quantized V cache with flash attention off."""
    for endpoint in placement.rpc:
        try:
            _devices.add_rpc_server(endpoint)
        except ValueError as exc:
            raise PlacementError(f"--rpc {endpoint}: {exc}") from exc
    targets = _targets(placement)
    _check(placement, targets)
    params = llama_cpp.llama_model_default_params()
    placed = Placed(placement, params, targets)
    if placement.n_gpu_layers is not None:
        params.n_gpu_layers = placement.n_gpu_layers
    params.split_mode = _SPLIT_MODES[placement.split_mode]
    params.main_gpu = placement.main_gpu
    params.load_mode = _LOAD_MODES[(not placement.no_mmap, placement.mlock)]
    if placement.devices:
        handles = (ctypes.c_void_p * (len(targets) + 1))(*(d.handle for d in targets), None)
        params.devices = ctypes.cast(handles, ctypes.c_void_p)
        placed._keep.append(handles)
    if placement.tensor_split:
        split = (ctypes.c_float * llama_cpp.llama_max_devices())(*placement.tensor_split)
        params.tensor_split = split
        placed._keep.append(split)
    if placement.n_cpu_moe and targets:
        _keep_experts_on_cpu(params, placement.n_cpu_moe, placed._keep)
    return placed


def _targets(placement: Placement) -> list[Device]:
    """The devices offloaded layers go to: the -dev list, else every GPU llama.cpp would
    take (RPC servers first, as it orders them), or none on a CPU-only build."""
    if placement.devices:
        chosen = []
        for name in placement.devices:
            device = _devices.by_name(name)
            if device is None or not device.offloads:
                known = ", ".join(d.name for d in _devices.devices() if d.offloads) or "none"
                raise PlacementError(
                    f"-dev {name}: no such GPU device in this build (devices: {known})"
                )
            chosen.append(device)
        return chosen
    found = [d for d in _devices.devices() if d.offloads]
    gpus = [d for d in found if d.kind == "gpu"]
    return gpus or found  # llama.cpp takes integrated GPUs only when there is no other


def _check(placement: Placement, targets: list[Device]) -> None:
    asked = placement.n_gpu_layers
    if asked is not None and asked != 0 and not targets:
        raise PlacementError(
            f"-ngl {'all' if asked < 0 else asked}: this build of llama.cpp has no GPU "
            "backend and no --rpc device, so every layer runs on the CPU. Reinstall for your "
            "GPU (make install LLAMA_BACKEND=cuda|vulkan|metal), add --rpc HOST:PORT, or drop "
            "-ngl (docs/hardware.md)."
        )
    if placement.tensor_split and len(placement.tensor_split) > llama_cpp.llama_max_devices():
        raise PlacementError(
            f"-ts: {len(placement.tensor_split)} proportions, but llama.cpp takes at most "
            f"{llama_cpp.llama_max_devices()} devices"
        )
    quantized_v = placement.cache_type_v not in ("f32", "f16", "bf16")
    if quantized_v and placement.flash_attn == "off":
        raise PlacementError(
            f"-ctv {placement.cache_type_v}: a quantized V cache needs flash attention; use "
            "-fa on or -fa auto"
        )


class _BuftOverride(ctypes.Structure):
    """struct llama_model_tensor_buft_override (not bound by llama-cpp-python)."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def _keep_experts_on_cpu(params: Any, n_layers: int, keep: list[Any]) -> None:
    """One override per layer, as llama-server's --n-cpu-moe: the experts of layers
    0..n-1 in host memory, the rest of those layers (attention, shared weights) placed as
    -ngl says. A dense model has no expert tensors: the overrides match nothing."""
    cpu = _devices.cpu_buffer_type()
    patterns = [_EXPERTS.format(layer=layer).encode() for layer in range(n_layers)]
    overrides = (_BuftOverride * (n_layers + 1))(
        *(_BuftOverride(pattern, cpu) for pattern in patterns), _BuftOverride(None, None)
    )
    params.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)
    keep.extend([patterns, overrides])
