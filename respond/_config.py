"""Settings: command-line flags > environment (RESPOND_*) > defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from respond.protocol.limits import Limits

__all__ = ["McpServerConfig", "McpSettings", "Settings", "Timeouts", "default_data_dir"]


def default_data_dir() -> Path:
    """$RESPOND_DATA_DIR, else $XDG_DATA_HOME/respond, else ~/.local/share/respond."""
    explicit = os.environ.get("RESPOND_DATA_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "respond"


@dataclass
class Settings:
    model_path: Path | None = None  # None: the bundled SmolLM2 model
    alias: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    n_ctx: int = 4096
    n_threads: int | None = None
    seed: int | None = None
    # The embedded engine's slots (requests decoded together), its queue beyond them, and
    # the tokens per decode step (the engine's own defaults are the same).
    n_slots: int = 4
    queue_max: int = 64
    n_batch: int = 512
    api_keys: list[str] = field(default_factory=list)  # lines: "key" or "tenant:key"
    data_dir: Path = field(default_factory=default_data_dir)
    store_url: str | None = None  # None: SQLite in data_dir
    secret_key: str | None = None  # None: a key generated once in data_dir
    store_ttl_seconds: int = 30 * 24 * 3600
    max_body_mb: int = 32
    max_file_mb: int = 64  # POST /v1/files: larger files get 413
    embedding_model: str | None = None  # a GGUF file; None: bundled MiniLM; "none": no model
    limits: Limits = field(default_factory=Limits)  # request limits (docs/api.md#limits)
    n_predict: int | None = None  # max_output_tokens for requests that set none
    background_max: int = 4  # background runs one process runs at once; more wait queued
    temperature: float = 1.0  # for requests that set none
    reasoning_events: Literal["openai", "openresponses"] = "openai"  # event names for reasoning
    log_level: str = "info"
    log_format: str = "text"  # or "json": one object per line
    metrics_auth: bool = False  # /metrics needs the API key
    # Upstream servers instead of (or, with a config file, beside) the embedded model.
    config_path: Path | None = None  # respond.toml: a table of models
    upstreams: list[str] = field(default_factory=list)  # base URLs of one pool
    upstream_key: str | None = None
    upstream_api: str = "chat"  # "chat" (Chat Completions) or "responses"
    mcp_allow: list[str] = field(default_factory=list)  # MCP URLs respond may connect to
    mcp_timeout: float = 60.0  # seconds, per MCP list or call


@dataclass(frozen=True)
class Timeouts:
    """Seconds. first_byte covers the wait for headers and the first chunk (prefill)."""

    connect: float = 5.0
    first_byte: float = 120.0
    idle: float = 60.0
    probe_interval: float = 5.0


@dataclass(frozen=True)
class McpServerConfig:
    """An MCP server the operator declared (`[mcp.servers.NAME]`): requests name it by
    `server_label` or `connector_id` and need no URL or secrets of their own."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    require_approval: Any = None  # as in a request; None: the request decides ("always")
    description: str | None = None


@dataclass(frozen=True)
class McpSettings:
    servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    allow: tuple[str, ...] = ()  # URL or host patterns (hosted/egress.py)
    timeout: float = 60.0
