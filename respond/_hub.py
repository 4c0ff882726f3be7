"""`respond serve -hf OWNER/NAME[:QUANT]`: which files of a Hugging Face hub repo to serve.

The file is chosen by its quant tag as llama-server chooses (llama.cpp's common/download.cpp):
the first GGUF whose path holds the tag followed by `.` or `-` (case-insensitive), Q4_K_M then
Q8_0 when no tag is given, else the repo's first GGUF; every part of a split GGUF
(`-00001-of-00003`); and the mmproj beside it closest in bits. respond/_hub_download.py
fetches them; this module imports nothing of huggingface_hub, so that reading the flags (every
`respond` command, every start) does not pay for it.
"""

from __future__ import annotations

import re
from argparse import ArgumentTypeError
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_TAGS", "HubError", "HubModel", "choose_mmproj", "choose_model", "parts"]

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")  # llama-server's, in its order
# GGUFs in a repo that are not a model to serve (llama.cpp skips the same).
_NOT_MODELS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
_SPLIT = re.compile(r"^(.+)-(\d{5})-of-(\d{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)


class HubError(Exception):
    """A model that cannot be fetched; the message says which and what to do."""


@dataclass(frozen=True)
class HubModel:
    gguf: Path  # the file to load (a split model's first part, its others beside it)
    mmproj: Path | None  # the repo's projector for images, where it has one

    @property
    def name(self) -> str:
        """The model's default id: the file's name without `.gguf` or a part's number."""
        return _split(self.gguf.name).prefix


def split_spec(spec: str) -> tuple[str, str]:
    """'owner/name:Q8_0' -> ('owner/name', 'Q8_0'); the tag is '' when none is given."""
    repo, _, tag = spec.partition(":")
    if repo.count("/") != 1 or not all(repo.split("/")) or ":" in tag:
        raise ValueError(
            f"invalid repo {spec!r}: use OWNER/NAME[:QUANT], e.g. unsloth/Qwen3-8B-GGUF"
        )
    return repo, tag


def check_spec(spec: str) -> str:
    """A -hf value, checked (a flag's parse function: argparse says the message)."""
    try:
        split_spec(spec)
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None
    return spec


@dataclass(frozen=True)
class _Split:
    prefix: str  # the path without `-0000k-of-0000N.gguf`
    tag: str  # upper-case, '' when the name has none
    index: int
    count: int


def _split(path: str) -> _Split:
    stem = path.removesuffix(".gguf")
    index = count = 1
    if match := _SPLIT.match(stem):
        stem, index, count = match[1], int(match[2]), int(match[3])
    tag = match[1].upper() if (match := _TAG.search(stem)) else ""
    return _Split(stem, tag, index, count)


def _bits(tag: str) -> int:
    """Q4_K_M -> 4, F16 -> 16, IQ4_XS -> 4: the number the tag's first digit starts."""
    digits = re.search(r"\d+", tag)
    return int(digits[0]) if digits else 0


def _is_model(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".gguf") and not any(word in name for word in _NOT_MODELS)


def choose_model(files: Sequence[str], tag: str) -> list[str]:
    """The files of the model `tag` names (a split model's parts in order); [] when none."""
    models = [f for f in files if _is_model(f) and _split(f).index == 1]
    for wanted in (tag,) if tag else DEFAULT_TAGS:
        pattern = re.compile(re.escape(wanted) + "[.-]", re.IGNORECASE)
        chosen = next((f for f in models if pattern.search(f)), None)
        if chosen is not None:
            return parts(files, chosen)
    return [] if tag or not models else parts(files, models[0])


def parts(files: Sequence[str], first: str) -> list[str]:
    split = _split(first)
    if split.count == 1:
        return [first]
    parts = [f for f in files if (s := _split(f)).prefix == split.prefix and s.count == split.count]
    return sorted(parts, key=lambda f: _split(f).index)


def choose_mmproj(files: Sequence[str], model: str) -> str | None:
    """The mmproj for `model`: in its folder or one above (the deepest first), then the one
    closest to it in bits (mmproj-Q8_0 for a Q8_0 model rather than mmproj-F16)."""
    folder = model.split("/")[:-1]
    best: tuple[int, int] | None = None
    chosen = None
    for path in files:
        if not path.endswith(".gguf") or "mmproj" not in path:
            continue
        where = path.split("/")[:-1]
        if folder[: len(where)] != where:
            continue
        rank = (-len(where), abs(_bits(_split(path).tag) - _bits(_split(model).tag)))
        if best is None or rank < best:
            best, chosen = rank, path
    return chosen
