"""Images on the embedded engine: llama.cpp's multimodal library (libmtmd), as
llama-cpp-python binds it (`llama_cpp.mtmd_cpp`), with the model's projector (--mmproj).

An image of a prompt is read by mtmd into chunks: an image chunk (the image, resized and
normalized for the projector, that becomes `n` embeddings) and, for projectors that frame
their images with tokens of their own, text chunks around it. In the token list of a prompt
(and of a slot) an image chunk stands as `n` placeholder ids derived from the image's hash:
negative, so never a token of the vocabulary, and equal only for the same image. The
prefix matching of the slots and of the prompt cache then reuses an image's cells exactly
when a prompt holds the same image at the same place, and never another image's.

The scheduler decodes an image chunk on its own, not in the shared text batch: mtmd encodes
it with the projector, then decodes its embeddings into the slot's sequence.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from respond.engines._base import EngineError

__all__ = [
    "Image",
    "Media",
    "data_url_bytes",
    "image_key",
    "image_positions",
    "placeholders",
    "shift_of",
    "whole_images",
]

# The placeholders of one image chunk: -(key * _SPAN + i) for its i-th embedding. A key is
# the chunk's hash (_KEY_BITS, never 0) above the positions it takes (the low 20 bits).
_SPAN = 1 << 20
_KEY_BITS = 40
# Images read last, by hash: a conversation's image is in every later turn's prompt, and a
# prompt is tokenized again to count it (truncation's search, several times).
_KEPT = 16


def placeholders(key: int, n: int) -> list[int]:
    """The ids an image chunk of `n` embeddings stands as in a token list."""
    return [-(key * _SPAN + i) for i in range(n)]


def image_key(token: int) -> int | None:
    """The key of the image chunk whose first placeholder `token` is, else None."""
    if token >= 0 or -token % _SPAN:
        return None
    return -token // _SPAN


def image_positions(key: int) -> int:
    """How many positions the image chunk of `key` takes in its sequence: as many as its
    embeddings, except on models with M-RoPE (Qwen2-VL and later), which count fewer."""
    return key % _SPAN


def shift_of(tokens: list[int]) -> int:
    """How many fewer positions than tokens `tokens` take (whole images in them: each takes
    its positions, not one a placeholder)."""
    if not tokens or min(tokens) >= 0:
        return 0
    shift = 0
    for token in tokens:
        if token < 0:
            key = image_key(token)
            shift += 1 - (image_positions(key) if key is not None else 0)
    return shift


def whole_images(tokens: list[int], kept: int) -> int:
    """`kept` moved back to the start of the image chunk it would cut in `tokens`: the
    cells of part of an image are never kept (an image is decoded whole)."""
    while 0 < kept < len(tokens) and tokens[kept] < 0 and image_key(tokens[kept]) is None:
        kept -= 1
    return kept


@dataclass(frozen=True)
class Image:
    """One image as mtmd read it: its ids in a prompt (text tokens and placeholders), and
    its image chunks by key (native; freed when the last holder lets go)."""

    tokens: list[int]
    chunks: Mapping[int, Any] = field(default_factory=dict)


class Media:
    """The projector, loaded for a model (blocking; RuntimeError when it cannot be)."""

    def __init__(self, path: Path, model: Any, *, n_threads: int, use_gpu: bool) -> None:
        from llama_cpp import mtmd_cpp  # its library loads with it: only for a projector
        from llama_cpp._logger import llama_log_callback

        self._mtmd = mtmd_cpp
        self._kept: OrderedDict[bytes, Image] = OrderedDict()
        self._kept_lock = threading.Lock()
        # mtmd logs each image it reads at INFO: through llama-cpp-python's callback, which
        # keeps llama.cpp's own log to errors (NativeModel's set_verbose(False)).
        mtmd_cpp.mtmd_helper_log_set(llama_log_callback, ctypes.c_void_p(0))
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.print_timings = False
        params.n_threads = n_threads
        ctx = mtmd_cpp.mtmd_init_from_file(str(path).encode(), model, params)
        if not ctx:
            raise RuntimeError(
                f"llama.cpp could not load the projector {path} (not an mmproj GGUF, or one "
                "made for another model: its embedding width must be the model's)"
            )
        self.ctx: Any = ctx
        if not mtmd_cpp.mtmd_support_vision(ctx):
            self.close()
            raise RuntimeError(f"the projector {path} has no vision encoder (an audio one?)")
        self.marker: str = mtmd_cpp.mtmd_default_marker().decode()

    def image(self, data: bytes) -> Image:
        """An image file's bytes (PNG, JPEG, GIF, BMP, ...: what stb_image reads) read for
        the projector; EngineError (a 400) when they are not an image it can read. Its
        chunks are only read after: the same Image serves every prompt it is in."""
        digest = hashlib.sha256(data).digest()
        with self._kept_lock:
            kept = self._kept.get(digest)
            if kept is not None:
                self._kept.move_to_end(digest)
                return kept
        image = self._read(data, digest)
        with self._kept_lock:
            self._kept[digest] = image
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return image

    def _read(self, data: bytes, digest: bytes) -> Image:
        mtmd = self._mtmd
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self.ctx, buffer, len(data), False)
        if not bitmap:
            raise _unreadable("it is not an image llama.cpp can decode (PNG, JPEG, GIF, BMP)")
        try:
            if mtmd.mtmd_bitmap_is_audio(bitmap):
                raise _unreadable("it is audio, and the model reads images")
            return self._tokenized(bitmap, digest)
        finally:
            mtmd.mtmd_bitmap_free(bitmap)

    def _tokenized(self, bitmap: Any, digest: bytes) -> Image:
        mtmd = self._mtmd
        chunks = mtmd.mtmd_input_chunks_init()
        marker = self.marker.encode()
        text = mtmd.mtmd_input_text(marker, len(marker), False, True)
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        status = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(text), bitmaps, 1)
        if status != 0:
            mtmd.mtmd_input_chunks_free(chunks)
            raise _unreadable(f"llama.cpp could not prepare it for the projector ({status})")
        tokens: list[int] = []
        keyed: dict[int, Any] = {}
        for index in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, index)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t(0)
                ids = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                tokens.extend(ids[i] for i in range(n.value))
                continue
            key = _key(digest, index, mtmd.mtmd_input_chunk_get_n_pos(chunk))
            tokens.extend(placeholders(key, mtmd.mtmd_input_chunk_get_n_tokens(chunk)))
            keyed[key] = chunk
        image = Image(tokens, keyed)
        # The chunks live as long as the Image (a prompt, a job, the tokenized prompts kept).
        weakref.finalize(image, mtmd.mtmd_input_chunks_free, chunks)
        return image

    def decode(self, chunk: Any, lctx: Any, *, seq: int, n_past: int, n_batch: int) -> int:
        """Encode an image chunk with the projector and decode its embeddings into sequence
        `seq` from position `n_past` (the decode thread's). llama.cpp's status: 0 is done."""
        mtmd = self._mtmd
        n_after = mtmd.llama_cpp.llama_pos(0)
        return int(
            mtmd.mtmd_helper_eval_chunk_single(
                self.ctx, lctx, chunk, n_past, seq, n_batch, False, ctypes.byref(n_after)
            )
        )

    def close(self) -> None:
        with self._kept_lock:
            self._kept.clear()
        if self.ctx:
            self._mtmd.mtmd_free(self.ctx)
            self.ctx = None


def data_url_bytes(url: str) -> bytes:
    """The bytes of a `data:` URL (base64 or percent-encoded); EngineError for any other URL:
    respond turns file ids and fetched URLs into data URLs before the engine sees them."""
    head, comma, payload = url.partition(",")
    if not head.lower().startswith("data:") or not comma:
        raise _unreadable("the embedded engine reads an image from a data: URL or a file_id")
    if not head.lower().endswith(";base64"):
        return unquote_to_bytes(payload)
    try:
        return base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise _unreadable(f"its data URL is not valid base64 ({exc})") from exc


def _key(digest: bytes, index: int, n_pos: int) -> int:
    """A chunk's key: from the image's hash and the chunk's place among its chunks, with the
    positions it takes."""
    mixed = hashlib.sha256(digest + index.to_bytes(4, "little")).digest()
    hashed = 1 + int.from_bytes(mixed[:8], "little") % ((1 << _KEY_BITS) - 1)
    return hashed * _SPAN + n_pos


def _unreadable(why: str) -> EngineError:
    return EngineError(
        f"An input image cannot be read: {why}.",
        code="invalid_image",
        status=400,
        param="input",
    )
