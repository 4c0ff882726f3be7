"""The native handles: one llama.cpp model and one context holding every slot's sequence.

llama-cpp-python's `Llama` class owns a single-sequence context; the engine needs one
context with `n_seq_max` sequences (one per slot), so it uses the low-level API directly.
The KV cache is not unified: each sequence has its own `n_ctx` cells, so a request gets the
whole context window whatever the others hold, and attention looks at its own cells only.
"""

from __future__ import annotations

import ctypes
import multiprocessing
from typing import Any, cast

import llama_cpp
import numpy as np
from llama_cpp._internals import LlamaModel
from llama_cpp._logger import set_verbose

from respond._config import Placement
from respond.engines.llamacpp._placement import place
from respond.engines.llamacpp._preempt import Preempt

__all__ = ["NativeModel"]


class NativeModel:
    """The model (weights, vocabulary) and the context its slots decode in.

    Tokenizing and detokenizing read only the vocabulary, so any thread may call them;
    everything touching the context (decode, memory, logits) belongs to the decode thread.
    """

    def __init__(
        self,
        path: str,
        *,
        n_ctx: int,
        n_slots: int,
        n_threads: int | None,
        n_batch: int,
        placement: Placement = Placement(),  # noqa: B008 (frozen: one shared default is safe)
    ) -> None:
        set_verbose(False)  # llama.cpp's own log: errors only, as `Llama(verbose=False)` has it
        self.placed = place(placement)  # raises PlacementError before anything loads
        params = self.placed.model
        # verbose=True: quiet, LlamaModel points the process's stdout and stderr at /dev/null
        # while it loads, and two loads at once (a config file's models) put back each
        # other's /dev/null, the server's log lost for good. llama.cpp's log is quiet anyway.
        # Untyped: typed as Any, not narrowed to the class mypy knows nothing of.
        self.model: Any = cast(Any, LlamaModel(path_model=path, params=params, verbose=True))
        self.vocab: Any = self.model.vocab
        self.n_vocab: int = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.n_layer: int = llama_cpp.llama_model_n_layer(self.model.model)
        self.n_batch = n_batch
        cores = multiprocessing.cpu_count()
        context = llama_cpp.llama_context_default_params()
        context.n_ctx = n_ctx * n_slots
        context.n_seq_max = n_slots
        context.kv_unified = False
        context.n_batch = n_batch
        context.n_ubatch = n_batch
        # llama-cpp-python's defaults, as respond had them: half the cores for one
        # token, all of them for a batch (several slots, or a prompt).
        context.n_threads = n_threads or max(cores // 2, 1)
        context.n_threads_batch = n_threads or cores
        context.no_perf = True
        self.preempt = Preempt()  # stops a long prompt's step for a request that arrives
        self.preempt.install(context)
        self.placed.configure_context(context)
        ctx = llama_cpp.llama_init_from_model(self.model.model, context)
        if not ctx:
            self.model.close()
            raise RuntimeError(f"llama.cpp could not create a context of {n_ctx} x {n_slots}")
        self.ctx: Any = ctx
        self.memory: Any = llama_cpp.llama_get_memory(ctx)
        # What llama.cpp gave each sequence (it pads to a multiple of 256).
        self.n_ctx_seq: int = llama_cpp.llama_n_ctx_seq(ctx)

    # ------------------------------------------------------------ vocabulary

    def tokenize(self, text: bytes, *, add_bos: bool, special: bool) -> list[int]:
        tokens: list[int] = self.model.tokenize(text, add_bos, special)
        return tokens

    def detokenize(self, tokens: list[int], *, special: bool = False) -> bytes:
        piece: bytes = self.model.detokenize(tokens, special=special)
        return piece

    def metadata(self) -> dict[str, str]:
        found: dict[str, str] = self.model.metadata()
        return found

    def token_bos(self) -> int:
        return int(llama_cpp.llama_vocab_bos(self.vocab))

    def token_eos(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self.vocab))

    def add_bos_token(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))

    def is_end(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    # ------------------------------------------------------------ context (decode thread)

    def keep(self, seq: int, n_tokens: int) -> None:
        """Drop sequence `seq`'s cells from position `n_tokens` on."""
        llama_cpp.llama_memory_seq_rm(self.memory, seq, n_tokens, -1)

    def copy(self, source: int, target: int) -> None:
        """Make sequence `target` a copy of sequence `source`: every cell, copied (across the
        streams of a non-unified cache) at the start of the next decode."""
        llama_cpp.llama_memory_seq_cp(self.memory, source, target, -1, -1)

    def save(self, seq: int) -> ctypes.Array[ctypes.c_uint8] | None:
        """A copy of sequence `seq`'s cells in host memory (llama.cpp's state of one
        sequence: positions and K/V rows), or None when llama.cpp could not write it."""
        size = llama_cpp.llama_state_seq_get_size(self.ctx, seq)
        if size == 0:
            return None
        state = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self.ctx, state, size, seq)
        return state if written == size else None

    def restore(self, seq: int, state: ctypes.Array[ctypes.c_uint8]) -> bool:
        """Make sequence `seq` hold the cells `state` was saved with (from any sequence of
        this context). False when llama.cpp refused it; it leaves the sequence empty then."""
        return int(llama_cpp.llama_state_seq_set_data(self.ctx, state, len(state), seq)) > 0

    def decode(self, batch: Any) -> int:
        return int(llama_cpp.llama_decode(self.ctx, batch))

    def logits(self, index: int) -> np.ndarray[Any, Any]:
        """The logits of the batch's output at `index` (valid until the next decode)."""
        pointer = llama_cpp.llama_get_logits_ith(self.ctx, index)
        floats = ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(floats, shape=(self.n_vocab,))

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        self.model.close()
