"""Fetching a model `-hf OWNER/NAME[:QUANT]` names (respond/_hub.py chooses its files).

huggingface_hub downloads them into its cache (HF_HOME, HF_HUB_CACHE), so a file another tool
downloaded is used, follows HF_ENDPOINT (a mirror), HF_HUB_OFFLINE and HF_TOKEN, and resumes a
cut connection. It checks only the size of what it downloads, so the sha256 the hub advertised
is checked here. Imported when a model is fetched, not at every start.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled
from tqdm import tqdm

from respond._hub import HubError, HubModel, choose_mmproj, choose_model, parts, split_spec

__all__ = ["fetch"]

log = logging.getLogger("respond")

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NO_HUB = (OfflineModeIsEnabled, httpx2.ConnectError, httpx2.TimeoutException)


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
        chosen = parts(files, named)
    else:
        chosen = choose_model(files, tag)
        if not chosen:
            wanted = tag or "Q4_K_M"
            raise HubError(f"{repo} has no GGUF tagged {wanted}{where}; {_available(files)}")
    mmproj = choose_mmproj(files, chosen[0])
    paths = [_download(repo, name, token) for name in chosen]
    log.info("model %s from %s: %s", chosen[0], repo, paths[0])
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
