"""`respond serve -hf OWNER/NAME[:QUANT]`: a GGUF fetched from the Hugging Face hub by name.

The file is chosen by its quant tag as llama-server chooses (llama.cpp's common/download.cpp):
the first GGUF whose path holds the tag followed by `.` or `-` (case-insensitive), Q4_K_M then
Q8_0 when no tag is given, else the repo's first GGUF; every part of a split GGUF
(`-00001-of-00003`); and the mmproj beside it closest in bits. huggingface_hub downloads them
into its cache (HF_HOME, HF_HUB_CACHE), so a file another tool downloaded is used, follows
HF_ENDPOINT (a mirror), HF_HUB_OFFLINE and HF_TOKEN, and resumes a cut connection. It checks
only the size of what it downloads, so the sha256 the hub advertised is checked here.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from argparse import ArgumentTypeError
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled
from tqdm import tqdm

__all__ = ["DEFAULT_TAGS", "HubError", "HubModel", "choose_mmproj", "choose_model", "fetch"]

log = logging.getLogger("respond")

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")  # llama-server's, in its order
# GGUFs in a repo that are not a model to serve (llama.cpp skips the same).
_NOT_MODELS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
_SPLIT = re.compile(r"^(.+)-(\d{5})-of-(\d{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NO_HUB = (OfflineModeIsEnabled, httpx2.ConnectError, httpx2.TimeoutException)


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
            return _parts(files, chosen)
    return [] if tag or not models else _parts(files, models[0])


def _parts(files: Sequence[str], first: str) -> list[str]:
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


def fetch(spec: str, *, file: str | None = None, token: str | None = None) -> HubModel:
    """The model `spec` names, downloaded (or found in the cache). Raises HubError."""
    repo, tag = split_spec(spec)
    files, cached = _listing(repo, tag, file, token)
    # Offline, the cache is all there is: say so, and where it is.
    where = (
        f" in the cache ({_cache_folder(repo)}), and the hub cannot be reached" if cached else ""
    )
    if file is not None:
        named = next((f for f in files if f.lower() == file.lower()), None)
        if named is None:
            raise HubError(f"{repo} has no file {file}{where}; {_available(files)}")
        parts = _parts(files, named)
    else:
        parts = choose_model(files, tag)
        if not parts:
            wanted = tag or "Q4_K_M"
            raise HubError(f"{repo} has no GGUF tagged {wanted}{where}; {_available(files)}")
    mmproj = choose_mmproj(files, parts[0])
    paths = [_download(repo, name, token) for name in parts]
    log.info("model %s from %s: %s", parts[0], repo, paths[0])
    projector = None if mmproj is None else _download(repo, mmproj, token)
    if projector is not None:
        log.info("mmproj %s from %s: %s", mmproj, repo, projector)
    return HubModel(gguf=paths[0], mmproj=projector)


def _available(files: Sequence[str]) -> str:
    ggufs = [f for f in files if f.endswith(".gguf")]
    listed = ", ".join(ggufs) if ggufs else "none"
    return f"its GGUF files: {listed} (name one with :QUANT or --hf-file)"


def _cache_folder(repo: str) -> Path:
    return Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"


def _listing(repo: str, tag: str, file: str | None, token: str | None) -> tuple[list[str], bool]:
    """The repo's files from the hub, else (offline, unreachable, down) the cache's, and
    whether they are the cache's."""
    try:
        info = HfApi().model_info(repo, token=token, timeout=constants.HF_HUB_ETAG_TIMEOUT)
        return [sibling.rfilename for sibling in info.siblings or []], False
    except _NO_HUB as exc:
        return _from_cache(repo, file or f"a GGUF tagged {tag or 'Q4_K_M'}", exc), True
    except HfHubHTTPError as exc:
        if exc.response.status_code >= 500:  # the hub is down: as unreachable, as llama.cpp
            return _from_cache(repo, file or f"a GGUF tagged {tag or 'Q4_K_M'}", exc), True
        raise HubError(f"{repo}: the hub refused: {_first_line(exc)}. {_token_hint()}") from exc


def _from_cache(repo: str, wanted: str, exc: Exception) -> list[str]:
    cached = _cached_files(repo)
    if cached:
        log.info("the hub cannot be reached (%s); using the cache", _why(exc))
        return cached
    raise HubError(
        f"{repo}: {wanted} is not in the cache ({_cache_folder(repo)}) and the hub cannot "
        f"be reached ({_why(exc)}). Start once with the hub reachable (HF_ENDPOINT names a "
        "mirror), or serve a local file with -m."
    ) from exc


def _cached_files(repo: str) -> list[str]:
    """The files of the cached snapshot of `main` (the revision -hf follows)."""
    folder = _cache_folder(repo)
    ref = folder / "refs" / "main"
    if not ref.is_file():
        return []
    snapshot = folder / "snapshots" / ref.read_text().strip()
    return sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())


def _download(repo: str, name: str, token: str | None) -> Path:
    """`name` from the cache or the hub; a newly downloaded file is checked against its sha256."""
    before = try_to_load_from_cache(repo, name)
    try:
        path = Path(hf_hub_download(repo, name, token=token, tqdm_class=_Progress))
    except LocalEntryNotFoundError as exc:
        raise HubError(
            f"{repo}: {name} is not in the cache ({_cache_folder(repo)}) and the hub cannot be "
            "reached. Start once with the hub reachable (HF_ENDPOINT names a mirror), or serve a "
            "local file with -m."
        ) from exc
    except HfHubHTTPError as exc:
        raise HubError(
            f"{repo}: cannot download {name}: {_first_line(exc)}. {_token_hint()}"
        ) from exc
    except (OSError, httpx2.HTTPError) as exc:
        raise HubError(
            f"{repo}: downloading {name} failed: {_first_line(exc)}. Start again to retry."
        ) from exc
    if not isinstance(before, str) or Path(before).resolve() != path.resolve():
        _verify(repo, name, path)
    return path


def _verify(repo: str, name: str, path: Path) -> None:
    """An LFS file's blob is named by the sha256 the hub advertised (X-Linked-Etag): a file
    whose bytes differ is removed, so the next start downloads it again."""
    blob = path.resolve()
    if not _SHA256.fullmatch(blob.name):
        return  # a small file kept in git: its etag is git's hash, not its content's sha256
    digest = hashlib.sha256()
    with blob.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() == blob.name:
        return
    blob.unlink()
    path.unlink()
    raise HubError(
        f"{repo}: {name} does not match the hub's checksum (sha256 {blob.name} advertised, "
        f"{digest.hexdigest()} received); removed from the cache ({_cache_folder(repo)}). "
        "Start again to download it again; if it keeps failing, the hub or mirror (HF_ENDPOINT) "
        "serves a broken file."
    )


class _Progress(tqdm):  # type: ignore[misc]
    """huggingface_hub's own bar hides itself off a terminal, but a log file (systemd, docker)
    is where a server's download is watched: this one always shows, less often there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("mininterval", 0.1 if sys.stderr.isatty() else 5.0)
        # huggingface_hub describes the bar by its URL's last 40 characters: the file says it.
        kwargs["desc"] = str(kwargs.get("desc") or "").rsplit("/", 1)[-1] or None
        super().__init__(*args, file=sys.stderr, **kwargs)


def _why(exc: Exception) -> str:
    if isinstance(exc, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set"
    return f"{constants.ENDPOINT}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    """What went wrong, without huggingface_hub's advice after it ('401 Client Error.
    Repository Not Found for url: ...')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]).rstrip(".") or type(exc).__name__


def _token_hint() -> str:
    return "A gated or private repo needs a token: --hf-token or HF_TOKEN."
