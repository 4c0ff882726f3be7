"""What an upstream says about its model at start: its context window, which
`truncation: "auto"` needs, and whether it reads images.

llama-server's `GET /props` has both (`default_generation_settings.n_ctx`,
`modalities.vision`); vLLM's `GET /v1/models` has the window (`max_model_len`).
llama-cpp-python's server says neither, so there the config file says it
(`context_window`, `vision`). An upstream that answers /props is llama-server, which
takes a llama.cpp grammar (`llama_server`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["ModelFacts", "discover"]

log = logging.getLogger("respond.upstream")


@dataclass(frozen=True)
class ModelFacts:
    context_window: int | None = None  # None: not said
    vision: bool | None = None
    llama_server: bool = False


def discover(base_url: str, model: str, api_key: str | None) -> ModelFacts:
    """What the first member says; None for each fact it does not say."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    props = _get(f"{base_url.removesuffix('/v1')}/props", headers) or {}
    settings = props.get("default_generation_settings")
    modalities = props.get("modalities")
    vision = modalities.get("vision") if isinstance(modalities, dict) else None
    vision = vision if isinstance(vision, bool) else None
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        return ModelFacts(int(settings["n_ctx"]), vision, llama_server=True)
    models = _get(f"{base_url}/models", headers) or {}
    for entry in models.get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model:
            length = entry.get("max_model_len")
            return ModelFacts(int(length) if isinstance(length, int) else None, vision)
    return ModelFacts(None, vision)


def _get(url: str, headers: dict[str, str]) -> dict[str, Any] | None:
    try:
        reply = httpx.get(url, headers=headers, timeout=5)
        value = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        log.info("model facts: %s: %s", url, exc)
        return None
    return value if isinstance(value, dict) else None
