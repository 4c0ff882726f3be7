"""An upstream's context window, which `truncation: "auto"` needs to know.

Asked once at start: llama-server's `GET /props` (`default_generation_settings.n_ctx`)
and vLLM's `GET /v1/models` (`max_model_len`). llama-cpp-python's server says it
nowhere, so there it comes from the config file (`context_window`).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

__all__ = ["discover_window"]

log = logging.getLogger("respond.upstream")


def discover_window(base_url: str, model: str, api_key: str | None) -> int | None:
    """The context window the first member reports, or None if it reports none."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    props = _get(f"{base_url.removesuffix('/v1')}/props", headers)
    settings = props.get("default_generation_settings") if props else None
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        return int(settings["n_ctx"])
    models = _get(f"{base_url}/models", headers) or {}
    for entry in models.get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model:
            length = entry.get("max_model_len")
            return int(length) if isinstance(length, int) else None
    return None


def _get(url: str, headers: dict[str, str]) -> dict[str, Any] | None:
    try:
        reply = httpx.get(url, headers=headers, timeout=5)
        value = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        log.info("context window: %s: %s", url, exc)
        return None
    return value if isinstance(value, dict) else None
