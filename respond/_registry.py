"""Build the engines `respond serve` serves: embedded GGUF, `--upstream`, or `--config`."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import httpx

from respond._config import Placement, Settings, Timeouts
from respond._config_file import EmbeddedModel, ModelEntry, UpstreamModel, config_of
from respond.engines import Engine

# Each kind of engine is imported where a model of its kind is built: a server of local
# models does not load the upstream clients (and jsonschema), nor the reverse.
if TYPE_CHECKING:
    from respond.engines.llamacpp import LlamaCppEngine
    from respond.engines.upstream import UpstreamPool

__all__ = ["build_engines", "discover_models", "upstream_engine"]

log = logging.getLogger("respond")

DISCOVERY_WAIT_S = 30.0  # an upstream started alongside respond may need a moment


def build_engines(settings: Settings) -> dict[str, Engine]:
    """The engines by public model name. Raises SystemExit with a readable message."""
    if settings.upstreams and (settings.config_path or settings.model_path or settings.hf_repo):
        raise SystemExit(
            "respond: --upstream serves the upstream's models; it does not combine with "
            "-m, -hf or --config (a config file can list both kinds of model)."
        )
    if settings.model_path and settings.hf_repo:
        raise SystemExit("respond: -m and -hf both name the model to serve; give one of them.")
    if settings.hf_file and not settings.hf_repo:
        raise SystemExit("respond: --hf-file names a file of a hub repo; give the repo with -hf.")
    if settings.config_path is not None:
        from respond._config_file import ConfigError

        try:
            config = config_of(settings)
        except ConfigError as exc:
            raise SystemExit(f"respond: {exc}") from exc
        if config is not None and config.models:  # else the flags choose the model
            return _from_entries(config.models, settings, from_file=True)
    if settings.upstreams:
        return _from_flags(settings)
    if settings.models_dir is not None:
        if settings.model_path is not None or settings.hf_repo is not None:
            raise SystemExit(
                "respond: --models-dir serves a folder; it does not combine with -m or -hf."
            )
        return _folder(settings)
    flags = EmbeddedModel(
        alias="",
        gguf=settings.model_path,
        hf=settings.hf_repo,
        hf_file=settings.hf_file,
        mmproj=settings.mmproj,
    )
    return _from_entries([flags], settings)


def _from_entries(
    entries: Sequence[ModelEntry], settings: Settings | None = None, *, from_file: bool = False
) -> dict[str, Engine]:
    engines: dict[str, Engine] = {}
    pools: dict[tuple[object, ...], UpstreamPool] = {}
    for entry in entries:
        if isinstance(entry, EmbeddedModel):
            assert settings is not None  # embedded entries come with the settings
            engine = _embedded(entry, settings, from_file=from_file)
        else:
            # Models served by the same servers share one pool: one in-flight count each.
            key = (entry.urls, entry.api_key, entry.timeouts)
            pool = pools.get(key)
            if pool is None:
                from respond.engines.upstream import UpstreamPool

                pool = pools[key] = UpstreamPool(
                    entry.urls, api_key=entry.api_key, timeouts=entry.timeouts
                )
            engine = upstream_engine(entry, pool)
        engines[engine.info.id] = engine
    return engines


def _embedded(entry: EmbeddedModel, settings: Settings, *, from_file: bool) -> Engine:
    from respond.engines.llamacpp import LlamaCppEngine

    path, default_alias, mmproj = _model_file(entry, settings)
    template = entry.chat_template_file if from_file else settings.chat_template_file
    if template is not None and not template.is_file():
        raise SystemExit(f"respond: chat template file not found: {template}")
    # The flags' placement, and a [models.NAME] table's keys over it.
    placement = dataclasses.replace(settings.placement, **entry.placement)
    if from_file:  # the table name is the alias
        return LlamaCppEngine(
            path,
            alias=entry.alias,
            n_ctx=entry.ctx_size,
            n_threads=entry.threads,
            seed=entry.seed,
            n_slots=entry.parallel,
            queue_max=entry.queue_max,
            chat_template_file=template,
            cache_ram_mb=entry.cache_ram,
            placement=placement,
            mmproj_path=mmproj,
        )
    alias = settings.alias or default_alias
    return _from_settings(path, alias, settings, template, placement, mmproj=mmproj)


def _from_settings(
    path: Path,
    alias: str,
    settings: Settings,
    template: Path | None,
    placement: Placement,
    *,
    mmproj: Path | None = None,
) -> LlamaCppEngine:
    """An embedded engine as the flags (and [serve]) describe it."""
    from respond.engines.llamacpp import LlamaCppEngine

    return LlamaCppEngine(
        path,
        alias=alias,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        seed=settings.seed,
        n_slots=settings.n_slots,
        queue_max=settings.queue_max,
        n_batch=settings.n_batch,
        chat_format=settings.chat_format,
        chat_template_file=template,
        cache_ram_mb=settings.cache_ram_mb,
        placement=placement,
        mmproj_path=mmproj,
    )


def _model_file(entry: EmbeddedModel, settings: Settings) -> tuple[Path, str, Path | None]:
    """The GGUF to load, its default alias, and its mmproj: the one given (--mmproj, the
    table's `mmproj`), else the hub repo's."""
    from respond._hub import HubError
    from respond._hub_download import fetch
    from respond.engines.llamacpp import BUNDLED_ALIAS, bundled_model_path

    given = entry.mmproj
    if given is not None and not given.is_file():
        raise SystemExit(f"respond: mmproj file not found: {given}")
    if entry.hf is not None:
        try:
            fetched = fetch(entry.hf, file=entry.hf_file, token=settings.hf_token)
        except HubError as exc:
            raise SystemExit(f"respond: {exc}") from exc
        return fetched.gguf, fetched.name, given or fetched.mmproj
    if entry.gguf is None:
        try:
            return bundled_model_path(), BUNDLED_ALIAS, given
        except FileNotFoundError as exc:
            raise SystemExit(f"respond: {exc}") from exc
    if not entry.gguf.is_file():
        raise SystemExit(f"respond: model file not found: {entry.gguf}")
    return entry.gguf, entry.gguf.stem, given


def _folder(settings: Settings) -> dict[str, Engine]:
    """Every GGUF of --models-dir, each loaded by the first request that names it."""
    from respond.engines.llamacpp._on_demand import (
        OnDemandEngine,
        Shelf,
        gguf_models,
        mmproj_beside,
    )

    folder = settings.models_dir
    assert folder is not None
    if not folder.is_dir():
        raise SystemExit(f"respond: --models-dir: not a folder: {folder}")
    paths = gguf_models(folder)
    if not paths:
        raise SystemExit(f"respond: --models-dir: no .gguf file in {folder}")
    shelf = Shelf(settings.models_max, settings.models_ttl)
    engines: dict[str, Engine] = {}
    for path in paths:
        mmproj = mmproj_beside(path)
        engines[path.stem] = OnDemandEngine(
            path,
            path.stem,
            n_ctx=settings.n_ctx,
            build=functools.partial(
                _from_settings, path, path.stem, settings, None, settings.placement, mmproj=mmproj
            ),
            shelf=shelf,
            vision=mmproj is not None,
        )
    log.info("--models-dir %s: %d models, loaded on demand", folder, len(engines))
    return engines


def upstream_engine(entry: UpstreamModel, pool: UpstreamPool) -> Engine:
    from respond.engines.upstream import ChatCompletionsEngine, ChatOptions, ResponsesEngine

    if entry.api == "responses":
        return ResponsesEngine(
            pool,
            alias=entry.alias,
            upstream_model=entry.upstream_model,
            vision=entry.vision,
        )
    return ChatCompletionsEngine(
        pool,
        alias=entry.alias,
        upstream_model=entry.upstream_model,
        options=ChatOptions(
            max_tokens_param=entry.max_tokens_param,
            send_reasoning=entry.send_reasoning,
            forced_calls=entry.forced_calls,
            grammars=entry.grammars,
            context_window=entry.context_window,
        ),
        vision=entry.vision,
    )


def _from_flags(settings: Settings) -> dict[str, Engine]:
    urls = tuple(url.rstrip("/") for url in settings.upstreams)
    names = discover_models(urls, settings.upstream_key)
    if settings.alias and len(names) != 1:
        raise SystemExit(
            f"respond: --alias names one model, but the upstream serves {len(names)} "
            f"({', '.join(names)}); use --config to name each."
        )
    api: Literal["chat", "responses"] = (
        "responses" if settings.upstream_api == "responses" else "chat"
    )
    entries: list[ModelEntry] = [
        UpstreamModel(
            alias=settings.alias or name,
            urls=urls,
            api=api,
            model=name,
            api_key=settings.upstream_key,
            timeouts=Timeouts(),
        )
        for name in names
    ]
    return _from_entries(entries)


def discover_models(
    urls: Sequence[str], api_key: str | None, *, wait: float = DISCOVERY_WAIT_S
) -> list[str]:
    """Model ids from the first upstream that answers GET /models (retrying for `wait` s)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + wait
    errors: list[str] = []
    while True:
        errors.clear()
        for url in urls:
            try:
                reply = httpx.get(f"{url}/models", headers=headers, timeout=5)
                reply.raise_for_status()
                names = [str(m["id"]) for m in reply.json().get("data", []) if m.get("id")]
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                errors.append(f"{url}: {exc}")
                continue
            if names:
                log.info("upstream %s serves: %s", url, ", ".join(names))
                return names
            errors.append(f"{url}: GET /models listed no models")
        if time.monotonic() >= deadline:
            raise SystemExit(
                "respond: could not discover the upstream's models (GET /models): "
                + "; ".join(errors)
            )
        time.sleep(0.5)
