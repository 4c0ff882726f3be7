"""ggml's device registry, read through ctypes: which devices this build of llama.cpp has
(the CPU, CUDA0, Metal, Vulkan0, RPC0 …), their memory, and llama.cpp's RPC servers added
as devices (`--rpc`), as llama-server's `--list-devices` and `--rpc` do.

llama-cpp-python binds llama.h but not ggml-backend.h; the functions here are ggml's own C
API, looked up through libllama's handle: the ggml libllama uses. (`llama_cpp._ggml` loads
`libggml.so`, which the wheel ships as a second copy of `libggml.so.0`, not a link to it: a
device registered there would be one llama.cpp never sees.)
"""

from __future__ import annotations

import ctypes
import socket
import threading
from dataclasses import dataclass
from typing import Any

from llama_cpp.llama_cpp import _lib as libllama

__all__ = ["Device", "add_rpc_server", "by_name", "cpu_buffer_type", "devices", "on_abort"]

# enum ggml_backend_dev_type
_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


def _bind(name: str, restype: Any, *argtypes: Any) -> Any:
    function = getattr(libllama, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


_p = ctypes.c_void_p
_dev_count = _bind("ggml_backend_dev_count", ctypes.c_size_t)
_dev_get = _bind("ggml_backend_dev_get", _p, ctypes.c_size_t)
_dev_name = _bind("ggml_backend_dev_name", ctypes.c_char_p, _p)
_dev_description = _bind("ggml_backend_dev_description", ctypes.c_char_p, _p)
_dev_type = _bind("ggml_backend_dev_type", ctypes.c_int, _p)
_dev_memory = _bind(
    "ggml_backend_dev_memory",
    None,
    _p,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
)
_reg_by_name = _bind("ggml_backend_reg_by_name", _p, ctypes.c_char_p)
_reg_proc = _bind("ggml_backend_reg_get_proc_address", _p, _p, ctypes.c_char_p)
_register = _bind("ggml_backend_register", None, _p)
_cpu_buffer_type = _bind("ggml_backend_cpu_buffer_type", _p)
_ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
_set_abort = _bind("ggml_set_abort_callback", _p, _ABORT_CALLBACK)


@dataclass(frozen=True)
class Device:
    name: str  # "CPU", "CUDA0", "RPC0" …: what -dev takes
    description: str  # the card's name; for RPC, the server's HOST:PORT
    kind: str  # cpu, gpu, igpu, accel
    handle: int  # ggml_backend_dev_t

    def memory(self) -> tuple[int, int]:
        """(free, total) bytes, as the device reports them now (an RPC server: its host's)."""
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        _dev_memory(self.handle, ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    @property
    def offloads(self) -> bool:
        """Layers can be placed on it (what llama.cpp offloads `-ngl` layers to)."""
        return self.kind in ("gpu", "igpu")


def devices() -> list[Device]:
    """Every device registered now: this build's backends, and RPC servers added so far."""
    found = []
    for index in range(_dev_count()):
        handle = _dev_get(index)
        found.append(
            Device(
                name=(_dev_name(handle) or b"").decode(),
                description=(_dev_description(handle) or b"").decode(),
                kind=_KINDS.get(_dev_type(handle), "other"),
                handle=handle,
            )
        )
    return found


def by_name(name: str) -> Device | None:
    return next((d for d in devices() if d.name.lower() == name.lower()), None)


_ADD_SERVER = ctypes.CFUNCTYPE(_p, ctypes.c_char_p)
_rpc_lock = threading.Lock()
_rpc_added: dict[str, list[Device]] = {}


def add_rpc_server(endpoint: str) -> list[Device]:
    """The devices of llama.cpp's `rpc-server` at HOST:PORT, registered once per process
    (a second model naming the same server shares them). Raises ValueError when this build
    has no RPC backend or the server does not answer."""
    with _rpc_lock:
        if endpoint in _rpc_added:
            return _rpc_added[endpoint]
        reg = _reg_by_name(b"RPC")
        address = _reg_proc(reg, b"ggml_backend_rpc_add_server") if reg else None
        if not address:
            raise ValueError(
                "this build of llama.cpp has no RPC backend: reinstall with `make install` "
                "(respond builds it in)"
            )
        _reachable(endpoint)  # ggml aborts the process on a refused connection
        before = {d.handle for d in devices()}
        server_reg = _ADD_SERVER(address)(endpoint.encode())
        if not server_reg:
            raise ValueError(f"the rpc-server at {endpoint} has no devices")
        _register(server_reg)
        added = [d for d in devices() if d.handle not in before]
        _rpc_added[endpoint] = added
        return added


def _reachable(endpoint: str) -> None:
    host, _, port = endpoint.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ValueError(
            f"no rpc-server answers at {endpoint} ({exc.strerror or exc}; is `ggml-rpc-server "
            f"-H HOST -p PORT` running there?)"
        ) from None


def cpu_buffer_type() -> int:
    """The host buffer type, which `--n-cpu-moe` keeps expert tensors in."""
    found: int = _cpu_buffer_type()
    return found


_abort_hook: list[Any] = []  # ggml's one callback; it must outlive every call into ggml


def on_abort(report: Any) -> None:
    """Call `report(message)` before ggml aborts the process (an RPC server that went away
    mid-decode cannot be recovered from inside llama.cpp): the reason reaches the log. Set
    once per process: every model (and every load of one, --models-dir) reports the same."""
    if _abort_hook:
        return

    def call(message: bytes | None) -> None:
        report((message or b"").decode(errors="replace").strip())

    _abort_hook.append(_ABORT_CALLBACK(call))
    _set_abort(_abort_hook[0])
