"""Settings: one typed object for everything `respond serve` can be told.

Each field a flag sets is listed once in respond/_flags.py (its flag, environment variable,
config-file key and help); the default is the field's own, here. `build_server(settings)`
(respond/_server.py) turns Settings into the running server.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from respond.protocol.limits import Limits

__all__ = [
    "DEFAULTS",
    "ConfigFile",
    "EmbeddedModel",
    "EmbeddingsUpstream",
    "McpServerConfig",
    "McpSettings",
    "ModelEntry",
    "Placement",
    "Settings",
    "Timeouts",
    "UpstreamModel",
    "WebSearchSettings",
    "default_data_dir",
]


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/respond, else ~/.local/share/respond ($RESPOND_DATA_DIR is the flag's)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "respond"


# Names llama-server takes for each placement choice (respond/engines/llamacpp/_placement.py
# maps them to llama.cpp's values).
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN = ("on", "off", "auto")
SPLIT_MODES = ("none", "layer", "row")


@dataclass(frozen=True)
class Placement:
    """Where the embedded model runs: llama-server's placement flags (docs/hardware.md)."""

    n_gpu_layers: int | None = None  # None: every layer, when there is a device to hold them
    n_cpu_moe: int = 0  # the expert tensors of the first N layers stay on the CPU
    flash_attn: str = "auto"
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    mlock: bool = False
    no_mmap: bool = False
    devices: tuple[str, ...] = ()  # -dev: device names; empty: every GPU (llama.cpp's choice)
    tensor_split: tuple[float, ...] = ()  # proportions per device
    main_gpu: int = 0
    split_mode: str = "layer"
    rpc: tuple[str, ...] = ()  # HOST:PORT of llama.cpp rpc-servers, added as devices


PLACEMENT_FIELDS = tuple(f.name for f in dataclasses.fields(Placement))


@dataclass
class Settings:
    model_path: Path | None = None  # None: the bundled SmolLM2 model
    # Or a GGUF fetched from the Hugging Face hub by name (respond/_hub.py).
    hf_repo: str | None = None  # OWNER/NAME[:QUANT]
    hf_file: str | None = None  # a file of that repo, instead of the one its quant tag names
    hf_token: str | None = None  # None: huggingface_hub's own (HF_TOKEN, `hf auth login`)
    # A folder of GGUFs served on demand (engines/llamacpp/_on_demand.py), instead of -m.
    models_dir: Path | None = None
    models_max: int = 4  # of them resident at once
    models_ttl: int = 0  # seconds idle before one is unloaded; 0: never
    mmproj: Path | None = None  # the model's vision projector (-hf, --models-dir find theirs)
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
    cache_ram_mb: int = 8192  # the prompt cache beyond the slots (MiB of host RAM); 0: off
    chat_format: str | None = None  # a format's name (--chat-format); None: from the template
    chat_template_file: Path | None = None  # a Jinja file instead of the GGUF's own template
    # Where the embedded model runs: the fields of Placement, one flag each, with its defaults.
    n_gpu_layers: int | None = Placement.n_gpu_layers
    n_cpu_moe: int = Placement.n_cpu_moe
    flash_attn: str = Placement.flash_attn
    cache_type_k: str = Placement.cache_type_k
    cache_type_v: str = Placement.cache_type_v
    mlock: bool = Placement.mlock
    no_mmap: bool = Placement.no_mmap
    devices: tuple[str, ...] = Placement.devices
    tensor_split: tuple[float, ...] = Placement.tensor_split
    main_gpu: int = Placement.main_gpu
    split_mode: str = Placement.split_mode
    rpc: tuple[str, ...] = Placement.rpc
    api_key: str | None = None
    api_key_file: Path | None = None  # lines: "key" or "tenant:key"
    api_keys: list[str] = field(default_factory=list)  # more such lines (no flag: for embedding)
    data_dir: Path = field(default_factory=default_data_dir)
    store_url: str | None = None  # None: SQLite in data_dir
    secret_key: str | None = None  # None: a key generated once in data_dir
    store_ttl_seconds: int = 30 * 24 * 3600
    max_body_mb: int = 32
    max_file_mb: int = 64  # POST /v1/files: larger files get 413
    # What reading one file for a vector store may cost (respond/files/_worker.py).
    extract_timeout: float = 60.0  # wall-clock seconds, in a child process
    extract_max_pages: int = 2000  # pages of a PDF
    extract_max_chars: int = 10_000_000  # characters of text
    embedding_model: str | None = None  # a GGUF file; None: bundled MiniLM; "none": no model
    max_input_items: int = Limits.input_items  # request limits (docs/api.md#limits)
    max_tools: int = Limits.tools
    n_predict: int | None = None  # max_output_tokens for requests that set none
    background_max: int = 4  # background runs one process runs at once; more wait queued
    drain_timeout: float = 30.0  # on SIGTERM: seconds for work in flight to finish
    keepalive: float = 5.0  # seconds of silence on a stream before a keep-alive is sent
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
    mcp_allow_loopback: bool = False  # requests may name MCP servers on this host's loopback
    mcp_timeout: float = 60.0  # seconds, per MCP list or call
    # Images by http(s) URL for the embedded engine, which respond fetches (responses/images.py).
    image_allow: list[str] = field(default_factory=list)
    image_allow_private: bool = False  # may they reach loopback and private addresses
    # The code_interpreter tool and the Containers API (docs/tools.md#code-interpreter).
    code_interpreter: bool = False
    code_interpreter_sandbox: Literal["namespaces", "limits-only"] = "namespaces"
    code_interpreter_python: str | None = None  # None: the interpreter respond runs on
    code_interpreter_timeout: float = 30.0  # wall-clock seconds per call
    code_interpreter_cpu: int = 30  # CPU seconds per call
    code_interpreter_memory_mb: int = 1024  # per call (cgroup), else per process (RLIMIT_AS)
    code_interpreter_disk_mb: int = 256  # /mnt/data and /tmp of a call together
    code_interpreter_processes: int = 32  # RLIMIT_NPROC of the call's user
    # The web_search tool (docs/tools.md#web-search): None runs none. The config file's
    # [web_search] table sets these too; a flag or its environment variable beats it.
    web_search: Literal["searxng", "brave", "tavily"] | None = None  # the search provider
    web_search_url: str | None = None  # SearXNG's base URL; another endpoint for brave/tavily
    web_search_key: str | None = None  # brave's or tavily's API key
    web_search_timeout: float | None = None  # seconds per search or page; None: 15
    web_search_allow_private: bool = False  # open_page may fetch loopback and private hosts
    # The --config file as read once (set by the command line; None: read config_path).
    config_file: ConfigFile | None = None

    @property
    def placement(self) -> Placement:
        return Placement(**{name: getattr(self, name) for name in PLACEMENT_FIELDS})

    @property
    def limits(self) -> Limits:
        return Limits(input_items=self.max_input_items, tools=self.max_tools)

    def key_lines(self) -> list[str]:
        """The API keys: --api-key, the lines of --api-key-file, api_keys. Raises OSError."""
        lines = [self.api_key] if self.api_key else []
        if self.api_key_file is not None:
            lines += self.api_key_file.read_text().splitlines()
        return lines + self.api_keys


@dataclass(frozen=True)
class Timeouts:
    """Seconds. first_byte covers the wait for headers and the first chunk (prefill)."""

    connect: float = 5.0
    first_byte: float = 120.0
    idle: float = 60.0
    probe_interval: float = 5.0


# Every default, once: the flags (_flags.py), the config file's tables, `assemble` (_parts.py)
# and the classes it builds take theirs from here.
DEFAULTS = Settings()


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
    allow_loopback: bool = False  # loopback URLs in requests (configured servers need not)
    timeout: float = DEFAULTS.mcp_timeout


@dataclass(frozen=True)
class WebSearchSettings:
    """The web_search tool's provider (responses/hosted/_search.py) and page fetching."""

    provider: Literal["searxng", "brave", "tavily"]
    url: str | None = None  # SearXNG's base URL; for brave and tavily, None: their own API
    api_key: str | None = None
    timeout: float = 15.0  # seconds per search, and per page opened
    allow_private: bool = False  # pages on loopback, private and link-local addresses


# ---------------------------------------------------------------- what a --config file says
# (read and checked by _config_file.py)


@dataclass(frozen=True)
class EmbeddedModel:
    alias: str
    gguf: Path | None  # None: the bundled model, unless `hf` names one
    hf: str | None = None  # OWNER/NAME[:QUANT] on the Hugging Face hub (respond/_hub.py)
    hf_file: str | None = None  # a file of that repo, instead of the one its tag names
    ctx_size: int = DEFAULTS.n_ctx  # an embedded model's table: what the flags default to
    threads: int | None = None
    seed: int | None = None
    parallel: int = DEFAULTS.n_slots
    queue_max: int = DEFAULTS.queue_max
    chat_template_file: Path | None = None  # None: the GGUF's own template
    cache_ram: int = DEFAULTS.cache_ram_mb
    mmproj: Path | None = None  # its vision projector; -hf fetches the repo's
    # Placement keys of its table (n_gpu_layers = 20 …), over the flags' and [serve]'s.
    placement: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpstreamModel:
    alias: str
    urls: tuple[str, ...]
    api: Literal["chat", "responses"] = "chat"
    model: str | None = None  # the name upstream; None: the alias
    api_key: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_reasoning: bool = True
    vision: bool = True
    forced_calls: Literal["structured", "native"] = "structured"
    grammars: Literal["auto", "gbnf", "check"] = "auto"
    context_window: int | None = None

    @property
    def upstream_model(self) -> str:
        return self.model or self.alias


ModelEntry = EmbeddedModel | UpstreamModel


@dataclass(frozen=True)
class EmbeddingsUpstream:
    url: str
    model: str  # the name upstream
    name: str  # the name clients send as `model`
    api_key: str | None = None
    timeout: float = 60.0
    max_chars: int | None = None  # cut each text to this many characters before sending
    start_wait: float = 30.0  # seconds to wait at start for the upstream's first vector


@dataclass(frozen=True)
class ConfigFile:
    """What one config file says, every table read from one parse."""

    path: Path
    serve: Mapping[str, Any] = field(default_factory=dict)  # checked by respond/_flags.py
    models: list[ModelEntry] = field(default_factory=list)  # none: the flags choose the model
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    mcp_allow: tuple[str, ...] = ()
    mcp_timeout: float | None = None  # None: --mcp-timeout's
    embeddings: EmbeddingsUpstream | None = None
    web_search: Mapping[str, Any] = field(default_factory=dict)  # the [web_search] table
