"""A vision projector for the bundled model, written with the gguf package: a LLaVA-style
CLIP tower (`clip.projector_type = "mlp"`) of two small layers with random weights, whose
output width is SmolLM2-135M's embedding width (576), so that llama.cpp's multimodal library
loads it beside the bundled model and reads images through it.

Its images mean nothing to the model; tests assert the path (encoded, counted, cached), not
the words. The key and tensor names are those llama.cpp's tools/mtmd/clip.cpp reads.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import gguf
import numpy as np

__all__ = ["IMAGE_TOKENS", "TEXT_WIDTH", "png", "write_mmproj"]

TEXT_WIDTH = 576  # SmolLM2-135M's n_embd: the projector's output must have it
IMAGE_SIZE = 64
PATCH_SIZE = 16
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # one embedding per patch (no class token)
_WIDTH = 32  # the vision tower's own width
_FF = 64
_HEADS = 4
_LAYERS = 2  # LLaVA reads the second-to-last layer's output: one layer runs


def write_mmproj(path: Path, *, seed: int = 0, text_width: int = TEXT_WIDTH) -> Path:
    """Write the projector to `path` (an mmproj GGUF of about 1.5 MB); `text_width` other
    than the bundled model's makes one for another model."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray[tuple[int, ...], np.dtype[np.float32]]:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("general.name", "respond test projector")
    writer.add_uint32("general.file_type", 0)  # all F32
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_uint32("clip.vision.embedding_length", _WIDTH)
    writer.add_uint32("clip.vision.feed_forward_length", _FF)
    writer.add_uint32("clip.vision.block_count", _LAYERS)
    writer.add_uint32("clip.vision.projection_dim", text_width)
    writer.add_uint32("clip.vision.attention.head_count", _HEADS)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_bool("clip.use_gelu", True)
    # Shapes as PyTorch has them (out, in); gguf stores them reversed, as ggml reads them.
    n_patches = IMAGE_TOKENS
    writer.add_tensor("v.patch_embd.weight", weights(_WIDTH, 3, PATCH_SIZE, PATCH_SIZE))
    writer.add_tensor("v.patch_embd.bias", weights(_WIDTH))
    writer.add_tensor("v.position_embd.weight", weights(n_patches, _WIDTH))
    writer.add_tensor("v.pre_ln.weight", np.ones(_WIDTH, dtype=np.float32))
    writer.add_tensor("v.pre_ln.bias", np.zeros(_WIDTH, dtype=np.float32))
    for layer in range(_LAYERS):
        block = f"v.blk.{layer}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{block}.{name}.weight", weights(_WIDTH, _WIDTH))
            writer.add_tensor(f"{block}.{name}.bias", weights(_WIDTH))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{block}.{norm}.weight", np.ones(_WIDTH, dtype=np.float32))
            writer.add_tensor(f"{block}.{norm}.bias", np.zeros(_WIDTH, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(_FF, _WIDTH))
        writer.add_tensor(f"{block}.ffn_up.bias", weights(_FF))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(_WIDTH, _FF))
        writer.add_tensor(f"{block}.ffn_down.bias", weights(_WIDTH))
    # The projector: width -> text_width -> text_width (mm.0, GELU, mm.2).
    writer.add_tensor("mm.0.weight", weights(text_width, _WIDTH))
    writer.add_tensor("mm.0.bias", weights(text_width))
    writer.add_tensor("mm.2.weight", weights(text_width, text_width))
    writer.add_tensor("mm.2.bias", weights(text_width))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def png(width: int, height: int, color: tuple[int, int, int]) -> bytes:
    """A PNG of one color, written by hand (no imaging library needed)."""
    row = b"\x00" + bytes(color) * width  # filter type 0, then RGB pixels
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    out = io.BytesIO()
    out.write(b"\x89PNG\r\n\x1a\n")
    out.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
    out.write(chunk(b"IDAT", zlib.compress(raw)))
    out.write(chunk(b"IEND", b""))
    return out.getvalue()
