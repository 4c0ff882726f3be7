"""The block `respond serve` prints once it is ready: where to go, what is served, a curl."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from respond._config import WebSearchSettings
from respond.engines._base import Engine

__all__ = [
    "WEB_SEARCH_OFF",
    "base_url",
    "ready_banner",
    "redact_url",
    "store_label",
    "web_search_label",
]

_SECRET_PARAMS = {"password", "sslpassword", "passfile", "sslkey"}


def redact_url(url: str) -> str:
    """A store URL fit for a log: no password, in the user part or the query."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:***@{host}" if ":" in user else f"{name}@{host}"
    query = urlencode(
        [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in parse_qsl(parts.query)],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def store_label(url: str | None, data_dir: Path) -> str:
    if url is None:
        return f"sqlite:{data_dir / 'respond.sqlite3'}"
    return redact_url(url)


def _browsable(host: str) -> str:
    """A host a browser on this machine can open (0.0.0.0 listens everywhere, opens nowhere)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def base_url(host: str, port: int) -> str:
    return f"http://{_browsable(host)}:{port}"


def _model_line(name: str, engine: Engine) -> str:
    info = engine.info
    facts = [info.backend]
    if info.context_window:
        facts.append(f"context {info.context_window} tokens")
    report = engine.load_report()
    if report is not None and report.slots is not None:
        facts.append(f"{report.slots} slot{'s' if report.slots != 1 else ''}")
    if info.state:
        facts.append(f"{info.state}, loads on demand")
    if info.placement:
        placed = info.placement
        facts.append(placed["layers"])
        facts.append(f"KV {placed['cache_type_k']}/{placed['cache_type_v']}")
        facts.append(f"flash attention {placed['flash_attn']}")
        facts += [
            f"--{name.replace('_', '-')}" for name in ("mlock", "no_mmap") if placed.get(name)
        ]
        if "n_cpu_moe" in placed:
            facts.append(f"experts of {placed['n_cpu_moe']} layers on the CPU")
    if info.upstreams:
        facts.append("via " + ", ".join(info.upstreams))
    if info.chat_format:
        facts.append(info.chat_format)
    if info.vision and info.image_bytes:  # an embedded model with its projector
        facts.append("reads images")
    failed = engine.load_error
    state = f"  NOT LOADED: {failed}" if failed else ""
    return f"{name} ({', '.join(facts)}){state}"


# What /v1/models and the banner say of web_search without a provider.
WEB_SEARCH_OFF = (
    "off: no search provider, web_search tools are left out (--web-search, or a "
    "[web_search] table in the config file)"
)


def web_search_label(search: WebSearchSettings | None) -> str:
    """The web_search line of the banner: its provider, or that it is not run."""
    if search is None:
        return WEB_SEARCH_OFF
    where = redact_url(search.url) if search.url else "its own API"
    return f"{search.provider} at {where}"


def ready_banner(
    engines: Mapping[str, Engine],
    *,
    host: str,
    port: int,
    store: str,
    auth: bool,
    metrics_auth: bool,
    web_search: str = "",
) -> str:
    base = base_url(host, port)
    names = list(engines)
    body = json.dumps({"model": names[0], "input": "Say hello in one sentence."})
    key = ' -H "Authorization: Bearer $RESPOND_API_KEY"' if auth else ""
    models = [_model_line(name, engines[name]) for name in names]
    auth_line = "on: send Authorization: Bearer <key>" if auth else "off (no key needed)"
    lines = [
        "",
        "respond is ready",
        f"  playground  {base}/",
        f"  API         {base}/v1",
        f"  model       {models[0]}",
        *(f"              {line}" for line in models[1:]),
        f"  store       {store}",
        f"  auth        {auth_line}",
        f"  metrics     {base}/metrics{' (needs the key)' if metrics_auth and auth else ''}",
        *([f"  web_search  {web_search}"] if web_search else []),
        "  try it:",
        f"    curl -s {base}/v1/responses -H 'Content-Type: application/json'{key} \\",
        f"      -d '{body}'",
        "",
    ]
    return "\n".join(lines)
