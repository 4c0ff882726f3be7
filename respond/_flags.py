"""Every setting of `respond serve`, once: the table argparse, the environment, the config file's
`[serve]` table, `--help` and the README's flag table are made from.

A setting is named by its long flag: `--ctx-size` is the environment variable `RESPOND_CTX_SIZE`
and the key `ctx_size` of `[serve]` in the `--config` file, and sets `Settings.n_ctx`. Its default
is the `Settings` field's. Precedence: flag > environment > config file > default.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from respond._config import CACHE_TYPES, FLASH_ATTN, PLACEMENT_FIELDS, SPLIT_MODES, Settings
from respond._hub import check_spec
from respond.engines.formats import FORMATS

__all__ = ["FLAGS", "PLACEMENT_FLAGS", "Flag", "from_file", "readme_table", "resolve"]

Kind = Literal["value", "list", "switch"]


def _at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: an integer >= {minimum}")
        return int(text)

    return parse


def _duration(text: str) -> int:
    """'3600' / '3600s' / '90m' / '12h' / '30d' -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value = text.strip().lower()
    scale = units.get(value[-1:], 0)
    number = value[:-1] if scale else value
    if not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use e.g. 3600, 90m, 12h, 30d")
    return int(number) * (scale or 1)


def _seconds_or_never(text: str) -> int:
    """A duration as `_duration` reads it, or 0 for never."""
    return 0 if text.strip() == "0" else _duration(text)


def _tokens_or_none(text: str) -> int | None:
    """A token count; 0 means none (as an unset RESPOND_N_PREDICT always did)."""
    return int(text) or None


def _switch(text: str) -> bool:
    """An environment switch: set to anything but '', '0' or 'false'."""
    return text.strip().lower() not in ("", "0", "false")


def _layers(text: str) -> int:
    """-ngl: a layer count, or `all` (llama.cpp's -1)."""
    if text.strip().lower() in ("all", "auto"):
        return -1
    return _at_least(0)(text)


def _names(text: str) -> tuple[str, ...]:
    """A comma list, as llama-server takes -dev and --rpc: `CUDA0,CUDA1`."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"invalid list {text!r}: use e.g. A,B")
    return names


def _endpoints(text: str) -> tuple[str, ...]:
    endpoints = _names(text)
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"invalid endpoint {endpoint!r}: use HOST:PORT")
    return endpoints


def _proportions(text: str) -> tuple[float, ...]:
    """-ts 3,1: the share of each device."""
    try:
        shares = tuple(float(part) for part in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid split {text!r}: use e.g. 3,1") from None
    if any(share < 0 for share in shares):
        raise argparse.ArgumentTypeError(f"invalid split {text!r}: shares are >= 0")
    return shares


def integer(text: str) -> int:
    return int(text)


def number(text: str) -> float:
    return float(text)


@dataclass(frozen=True)
class Flag:
    field: str  # the Settings attribute it sets
    flags: tuple[str, ...]  # short, then long; the long one names the env var and the TOML key
    help: str  # --help's text; the README's too unless `readme` says more
    parse: Callable[[str], Any] = str  # text (a flag, the environment, a TOML scalar) -> value
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    kind: Kind = "value"  # "list": repeatable, a comma list in the environment; "switch": on/off
    shown: str | None = None  # the default as people read it; None: the Settings default
    readme: str | None = None  # the README's description, where it links to more
    in_file: bool = True  # a key of the config file's [serve] table

    @property
    def long(self) -> str:
        return self.flags[-1]

    @property
    def env(self) -> str:
        return "RESPOND_" + self.long.removeprefix("--").upper().replace("-", "_")

    @property
    def key(self) -> str:
        """Its key in the config file's [serve] table."""
        return self.long.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> Any:
        for item in dataclasses.fields(Settings):
            if item.name == self.field:
                if item.default_factory is not dataclasses.MISSING:
                    return item.default_factory()
                return item.default
        raise LookupError(self.field)

    def default_text(self) -> str:
        if self.shown is not None:
            return self.shown
        value = self.default
        if value is None or value == [] or value == ():
            return "none"
        if value is False:
            return "off"
        return f"`{value}`"

    def value(self, text: str) -> Any:
        """`text` (from the environment or the config file) as the setting's value."""
        if self.kind == "switch":
            return _switch(text)
        if self.kind == "list":
            return [self.convert(part) for part in text.split(",") if part]
        return self.convert(text)

    def convert(self, text: str) -> Any:
        """One value's text (a flag's, a list's item) as the value, checked against the choices."""
        try:
            value = self.parse(text)
        except ValueError as exc:  # int("x"): say what was expected, as argparse would
            name = getattr(self.parse, "__name__", "")
            raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r}") from exc
        if self.choices and value not in self.choices:
            raise argparse.ArgumentTypeError(
                f"invalid choice {text!r} (choose from {', '.join(self.choices)})"
            )
        return value


FLAGS: tuple[Flag, ...] = (
    Flag(
        "model_path",
        ("-m", "--model"),
        "GGUF file to serve",
        Path,
        "FILE",
        shown="bundled SmolLM2",
    ),
    Flag(
        "mmproj",
        ("-mm", "--mmproj"),
        "the multimodal projector (mmproj GGUF) of the -m model: it then reads images",
        Path,
        "FILE",
        shown="none (-hf fetches the repo's)",
        readme="the vision projector (mmproj GGUF) of the model, as llama-server's flag: the "
        "model then reads images ([docs/models.md](docs/models.md#images))",
    ),
    Flag(
        "hf_repo",
        ("-hf", "-hfr", "--hf-repo"),
        "a GGUF from the Hugging Face hub, chosen by its quant tag (default Q4_K_M), downloaded "
        "into the HF cache and served as -m serves a file",
        check_spec,
        "OWNER/NAME[:QUANT]",
        readme="a GGUF from the Hugging Face hub by its quant tag (`Q4_K_M` by default), "
        "downloaded into the HF cache with its mmproj, then served as with `-m` "
        "([docs/models.md](docs/models.md#fetching-a-model-by-name))",
    ),
    Flag(
        "hf_file",
        ("-hff", "--hf-file"),
        "the file of the -hf repo to serve, instead of the one its quant tag names",
        metavar="FILE",
    ),
    Flag(
        "hf_token",
        ("-hft", "--hf-token"),
        "the Hugging Face token for gated or private repos",
        metavar="TOKEN",
        shown="`$HF_TOKEN`, or the one `hf auth login` saved",
    ),
    Flag(
        "models_dir",
        ("--models-dir",),
        "serve every GGUF of this folder, each loaded when a request first names it",
        Path,
        "DIR",
        readme="serve every GGUF of a folder, each loaded when first asked for "
        "([docs/models.md](docs/models.md#a-folder-of-models))",
    ),
    Flag(
        "models_max",
        ("--models-max",),
        "models of --models-dir loaded at once; the least recently used idle one is unloaded",
        _at_least(1),
        "N",
    ),
    Flag(
        "models_ttl",
        ("--models-ttl",),
        "unload a model of --models-dir idle this long (3600, 90m, 12h; 0: never)",
        _seconds_or_never,
        "D",
        shown="never",
    ),
    Flag(
        "alias",
        ("-a", "--alias"),
        "the model id clients use",
        metavar="NAME",
        shown="`smollm2-135m`, or the file name",
    ),
    Flag("host", ("--host",), "the address to listen on", metavar="HOST"),
    Flag("port", ("--port",), "the port to listen on", integer, "PORT"),
    Flag("n_ctx", ("-c", "--ctx-size"), "context window in tokens", integer, "N"),
    Flag(
        "n_threads",
        ("-t", "--threads"),
        "CPU threads for generation",
        integer,
        "N",
        shown="llama.cpp's default",
    ),
    Flag(
        "n_slots",
        ("-np", "--parallel"),
        "slots: requests the embedded model generates at once",
        _at_least(1),
        "N",
        readme="slots: requests the embedded model generates at once, each with the whole `-c` "
        "window ([operations](docs/operations.md"
        "#slots-the-queue-and-the-prompt-cache-embedded-engine))",
    ),
    Flag(
        "queue_max",
        ("--queue-max",),
        "requests that may wait for a slot; more are answered 429",
        _at_least(0),
        "N",
        readme="requests that may wait for a slot; beyond, 429 with `Retry-After`",
    ),
    Flag(
        "cache_ram_mb",
        ("--cache-ram",),
        "MiB of host RAM that keep the KV cache of conversations that left their slot, "
        "restored when they continue (0: off)",
        _at_least(0),
        "MiB",
        readme="MiB of host RAM keeping the KV cache of conversations that left their slot, "
        "restored when they continue; `0`: off ([operations](docs/operations.md"
        "#the-prompt-cache-beyond-the-slots---cache-ram))",
    ),
    Flag(
        "n_batch",
        ("-b", "--batch-size"),
        "tokens per decode step; longer prompts are read in chunks",
        _at_least(32),
        "N",
    ),
    Flag(
        "chat_format",
        ("--chat-format",),
        "the embedded model's tool-call and reasoning format (default: read off its chat "
        "template; docs/models.md)",
        metavar="NAME",
        choices=tuple(f.name for f in FORMATS),
        shown="from the template",
        readme="the embedded model's tool-call format, instead of the one read off its chat "
        "template ([docs/models.md](docs/models.md); `respond serve --help` lists the names)",
    ),
    Flag(
        "chat_template_file",
        ("--chat-template-file",),
        "a Jinja chat template for the embedded model, instead of the one in its GGUF",
        Path,
        "FILE",
        shown="the GGUF's",
        readme="a Jinja chat template for the embedded model, instead of the one in its GGUF "
        "(as llama-server's flag; [docs/models.md](docs/models.md#another-template))",
    ),
    Flag(
        "n_gpu_layers",
        ("-ngl", "--n-gpu-layers"),
        "layers of the embedded model on the GPU (or --rpc devices): a number, or all",
        _layers,
        "N|all",
        shown="all when the build has a GPU backend",
        readme="layers of the embedded model on the GPU or `--rpc` devices, a number or `all` "
        "([docs/hardware.md](docs/hardware.md))",
    ),
    Flag(
        "n_cpu_moe",
        ("-ncmoe", "--n-cpu-moe"),
        "keep the MoE expert weights of the first N layers on the CPU",
        _at_least(0),
        "N",
    ),
    Flag(
        "flash_attn",
        ("-fa", "--flash-attn"),
        "flash attention",
        choices=FLASH_ATTN,
    ),
    Flag(
        "cache_type_k",
        ("-ctk", "--cache-type-k"),
        "KV-cache type of K",
        choices=CACHE_TYPES,
        metavar="TYPE",
    ),
    Flag(
        "cache_type_v",
        ("-ctv", "--cache-type-v"),
        "KV-cache type of V (quantized types need flash attention)",
        choices=CACHE_TYPES,
        metavar="TYPE",
    ),
    Flag("mlock", ("--mlock",), "keep the model in RAM (no swapping)", kind="switch"),
    Flag(
        "no_mmap", ("--no-mmap",), "read the model into memory instead of mapping it", kind="switch"
    ),
    Flag(
        "devices",
        ("-dev", "--device"),
        "the devices to place layers on, comma-separated (CUDA0,CUDA1; the log lists them)",
        _names,
        "DEV,...",
        shown="every GPU",
    ),
    Flag(
        "tensor_split",
        ("-ts", "--tensor-split"),
        "how much of the model each device holds, e.g. 3,1",
        _proportions,
        "N,...",
        shown="by free memory",
    ),
    Flag("main_gpu", ("-mg", "--main-gpu"), "the GPU of -sm none", _at_least(0), "N"),
    Flag(
        "split_mode",
        ("-sm", "--split-mode"),
        "how layers are split across GPUs",
        choices=SPLIT_MODES,
    ),
    Flag(
        "rpc",
        ("--rpc",),
        "llama.cpp rpc-servers to place layers on, HOST:PORT,...",
        _endpoints,
        "HOST:PORT,...",
        readme="llama.cpp `rpc-server`s whose devices take layers, `HOST:PORT,...` "
        "([docs/hardware.md](docs/hardware.md#rpc))",
    ),
    Flag(
        "seed",
        ("--seed",),
        "the embedded model's sampling seed",
        integer,
        "N",
        shown="random",
    ),
    Flag(
        "api_key",
        ("--api-key",),
        "require this key (Authorization: Bearer KEY) on /v1",
        metavar="KEY",
        readme="require `Authorization: Bearer KEY` on `/v1`",
    ),
    Flag(
        "api_key_file",
        ("--api-key-file",),
        "file of keys, one per line, 'key' or 'tenant:key'",
        Path,
        "FILE",
        readme="one key per line, `key` or `tenant:key`",
    ),
    Flag(
        "data_dir",
        ("--data-dir",),
        "where state is kept",
        Path,
        "DIR",
        shown="`$XDG_DATA_HOME/respond` (`~/.local/share/respond`)",
    ),
    Flag(
        "store_url",
        ("--store",),
        "postgresql://user@host/db[?schema=NAME] to share state between replicas",
        metavar="URL",
        shown="SQLite in the data dir",
        readme="`postgresql://user@host/db[?schema=NAME]` to share state between replicas",
    ),
    Flag(
        "store_ttl_seconds",
        ("--store-ttl",),
        "how long stored responses and conversations are kept: 3600, 90m, 12h, 30d",
        _duration,
        "D",
        shown="`30d`",
        readme="how long stored responses and conversations are kept (`3600`, `90m`, `12h`, `30d`)",
    ),
    Flag(
        "secret_key",
        ("--secret-key",),
        "key that seals reasoning.encrypted_content",
        metavar="KEY",
        shown="generated once, kept in the data dir as `secret.key`",
        readme="key that seals `reasoning.encrypted_content` (and thinking signatures), the same "
        "on every replica ([docs/tools.md](docs/tools.md))",
    ),
    Flag("max_body_mb", ("--max-body-mb",), "larger request bodies get 413", integer, "N"),
    Flag(
        "max_file_mb",
        ("--max-file-mb",),
        "largest file POST /v1/files accepts, in MiB; larger ones get 413",
        integer,
        "N",
        readme="larger uploads to `/v1/files` get 413 ([docs/files.md](docs/files.md))",
    ),
    Flag(
        "extract_timeout",
        ("--extract-timeout",),
        "seconds reading one file for a vector store may take (in a child process); longer "
        "fails the file",
        number,
        "S",
        readme="seconds reading one file for a vector store may take, in a child process; "
        "longer fails the file ([extraction limits](docs/files.md#extraction-limits))",
    ),
    Flag(
        "extract_max_pages",
        ("--extract-max-pages",),
        "PDFs with more pages fail to index",
        integer,
        "N",
    ),
    Flag(
        "extract_max_chars",
        ("--extract-max-chars",),
        "files with more characters of text fail to index",
        integer,
        "N",
    ),
    Flag(
        "embedding_model",
        ("--embedding-model",),
        "GGUF embedding model for /v1/embeddings and vector search ('none': lexical search only)",
        metavar="FILE.gguf|none",
        shown="bundled all-MiniLM-L6-v2",
        readme="the model of `/v1/embeddings` and vector search, `none` for lexical search only "
        "([docs/files.md](docs/files.md#embeddings))",
    ),
    Flag(
        "max_input_items",
        ("--max-input-items",),
        "input items one request may send",
        integer,
        "N",
        readme="input items one request may send; all limits are in "
        "[docs/api.md](docs/api.md#limits)",
    ),
    Flag("max_tools", ("--max-tools",), "tools one request may define", integer, "N"),
    Flag(
        "n_predict",
        ("-n", "--n-predict"),
        "max_output_tokens for requests that set none (0: none, up to the context window)",
        _tokens_or_none,
        "N",
        readme="`max_output_tokens` for requests that set none (`0`: none)",
    ),
    Flag(
        "temperature",
        ("--temp",),
        "sampling temperature for requests that set none",
        number,
        "T",
    ),
    Flag(
        "background_max",
        ("--background-max",),
        "background runs this process runs at once; more wait queued in the store, for any "
        "replica to start",
        _at_least(0),
        "N",
        readme="background runs this process runs at once; more wait queued in the store for any "
        "replica ([docs/state.md](docs/state.md#the-background-queue))",
    ),
    Flag(
        "drain_timeout",
        ("--drain-timeout",),
        "on SIGTERM, seconds that requests in flight and background runs get to finish while "
        "new requests are refused with 503",
        number,
        "S",
        readme="on SIGTERM, seconds that requests in flight and background runs get to finish "
        "while new requests get 503 "
        "([docs/deploy.md](docs/deploy.md#rolling-restarts-sigterm-drains))",
    ),
    Flag(
        "keepalive",
        ("--keepalive",),
        "seconds a stream may stay silent (a long prompt being read) before a keep-alive is "
        "sent: an SSE comment on Responses and Chat Completions, a ping on Messages and "
        "WebSockets",
        number,
        "S",
        readme="seconds a stream may stay silent (a long prompt being read) before a keep-alive "
        "is sent ([docs/api.md](docs/api.md#keep-alives))",
    ),
    Flag(
        "reasoning_events",
        ("--reasoning-events",),
        "names of the reasoning text stream events: OpenAI's response.reasoning_text.* (what "
        "OpenAI clients know) or the Open Responses spec's response.reasoning.*",
        choices=("openai", "openresponses"),
        readme="reasoning streams as `response.reasoning_text.*` (OpenAI) or "
        "`response.reasoning.*` (Open Responses)",
    ),
    Flag(
        "log_level",
        ("--log-level",),
        "one access line per request, with tokens, at info",
        choices=("debug", "info", "warning", "error"),
    ),
    Flag(
        "log_format",
        ("--log-format",),
        "text lines, or one JSON object per line",
        choices=("text", "json"),
        readme="`json`: one JSON object per line (request id, route, status, duration, tokens, "
        "tenant)",
    ),
    Flag(
        "metrics_auth",
        ("--metrics-auth",),
        "require the API key on /metrics too",
        kind="switch",
        readme="require the API key on `/metrics` too",
    ),
    Flag(
        "upstreams",
        ("--upstream",),
        "serve the models of this OpenAI-compatible server (base URL ending in /v1); repeat for "
        "a pool",
        metavar="URL",
        kind="list",
        readme="serve the models of an OpenAI-compatible server (vLLM, SGLang, llama-server, "
        "Ollama); repeat for a pool ([docs/upstreams.md](docs/upstreams.md))",
    ),
    Flag("upstream_key", ("--upstream-key",), "the upstream's API key", metavar="KEY"),
    Flag(
        "upstream_api",
        ("--upstream-api",),
        "the API the upstream speaks: chat (Chat Completions) or responses",
        choices=("chat", "responses"),
    ),
    Flag(
        "config_path",
        ("--config",),
        "TOML file: [serve] settings, a table of models (embedded or upstream), MCP servers",
        Path,
        "FILE",
        readme="a TOML file: these settings (`[serve]`), a table of models, embedded or upstream "
        "pools ([docs/upstreams.md](docs/upstreams.md)), and MCP servers "
        "([docs/tools.md](docs/tools.md#configured-servers))",
        in_file=False,
    ),
    Flag(
        "mcp_allow",
        ("--mcp-allow",),
        "let requests use MCP servers whose host matches this wildcard pattern, or whose URL "
        "starts with this URL (scheme, host, port, path) (repeatable; beyond configured servers)",
        metavar="PATTERN",
        kind="list",
        readme="MCP servers requests may use, beyond configured servers: a host wildcard "
        "(`*.corp.example`) or a URL prefix (repeatable; "
        "[egress](docs/tools.md#egress))",
    ),
    Flag(
        "mcp_allow_loopback",
        ("--mcp-allow-loopback",),
        "let requests use MCP servers on this host's loopback (localhost, 127.0.0.0/8, ::1); "
        "off by default, configured servers excepted",
        kind="switch",
    ),
    Flag(
        "image_allow",
        ("--image-allow",),
        "let requests give the embedded model images by http(s) URL from hosts that match this "
        "wildcard pattern, or URLs that start with this URL (repeatable; none by default)",
        metavar="PATTERN",
        kind="list",
        readme="hosts (a wildcard) or URL prefixes the embedded model's images may be fetched "
        "from by URL; none by default ([docs/models.md](docs/models.md#images))",
    ),
    Flag(
        "image_allow_private",
        ("--image-allow-private",),
        "let --image-allow admit loopback and private addresses (127/8, ::1, 10/8, 172.16/12, "
        "192.168/16, link-local, fc00::/7), refused by default whatever the patterns say",
        kind="switch",
    ),
    Flag(
        "mcp_timeout",
        ("--mcp-timeout",),
        "seconds for one MCP tool listing or call",
        number,
        "S",
    ),
    Flag(
        "web_search",
        ("--web-search",),
        "run the web_search tool through this search provider: searxng (a SearXNG instance's "
        "JSON API, at --web-search-url), brave or tavily (with --web-search-key)",
        metavar="PROVIDER",
        choices=("searxng", "brave", "tavily"),
        readme="run the `web_search` tool through a search provider: `searxng`, `brave` or "
        "`tavily`; also the config file's `[web_search]` table "
        "([docs/tools.md](docs/tools.md#web-search))",
        in_file=False,
    ),
    Flag(
        "web_search_url",
        ("--web-search-url",),
        "the SearXNG instance's base URL; for brave or tavily, another endpoint than theirs",
        metavar="URL",
        in_file=False,
    ),
    Flag(
        "web_search_key",
        ("--web-search-key",),
        "the brave or tavily API key",
        metavar="KEY",
        in_file=False,
    ),
    Flag(
        "web_search_timeout",
        ("--web-search-timeout",),
        "seconds for one search, or one page opened",
        number,
        "S",
        shown="`15`",
        in_file=False,
    ),
    Flag(
        "web_search_allow_private",
        ("--web-search-allow-private",),
        "let web_search open pages on loopback, private and link-local addresses (off: only "
        "public hosts)",
        kind="switch",
        in_file=False,
    ),
    Flag(
        "code_interpreter",
        ("--code-interpreter",),
        "run the code_interpreter tool (Python in a sandbox) and serve /v1/containers",
        kind="switch",
        readme="run the `code_interpreter` tool (Python in a sandbox) and serve "
        "`/v1/containers` ([docs/tools.md](docs/tools.md#code-interpreter))",
    ),
    Flag(
        "code_interpreter_sandbox",
        ("--code-interpreter-sandbox",),
        "how code is isolated: namespaces (no network, a root of its own; needs root or "
        "user namespaces), or limits-only (weaker: resource limits only)",
        choices=("namespaces", "limits-only"),
        readme="`namespaces`: no network, its own root, PID namespace (needs root or user "
        "namespaces; respond refuses to start without); `limits-only`: resource limits only "
        "([the sandbox](docs/tools.md#the-sandbox))",
    ),
    Flag(
        "code_interpreter_python",
        ("--code-interpreter-python",),
        "the Python interpreter code runs on",
        metavar="FILE",
        shown="the one respond runs on",
    ),
    Flag(
        "code_interpreter_timeout",
        ("--code-interpreter-timeout",),
        "wall-clock seconds one call may run",
        number,
        "S",
    ),
    Flag(
        "code_interpreter_cpu",
        ("--code-interpreter-cpu",),
        "CPU seconds one call may use",
        _at_least(1),
        "S",
    ),
    Flag(
        "code_interpreter_memory_mb",
        ("--code-interpreter-memory-mb",),
        "memory of one call, its processes together (a cgroup where respond can make one; "
        "else each process's address space), in MiB",
        _at_least(64),
        "N",
    ),
    Flag(
        "code_interpreter_disk_mb",
        ("--code-interpreter-disk-mb",),
        "what a call may write (/mnt/data and /tmp together), in MiB",
        _at_least(1),
        "N",
    ),
    Flag(
        "code_interpreter_processes",
        ("--code-interpreter-processes",),
        "processes the call's user may have at once (as root, each call is a user of its own)",
        _at_least(1),
        "N",
    ),
)


# The flags a [models.NAME] table of an embedded model may set too (respond/_config_file.py).
PLACEMENT_FLAGS = tuple(flag for flag in FLAGS if flag.field in PLACEMENT_FIELDS)


def add_to(parser: argparse.ArgumentParser) -> None:
    """The flags, each given or absent (argparse.SUPPRESS): `resolve` layers the rest."""
    for flag in FLAGS:
        shown = flag.default_text().replace("`", "")
        text = flag.help
        if flag.choices and flag.metavar:  # choices the metavar does not show: listed here
            text += f"; one of: {', '.join(flag.choices)}"
        options: dict[str, Any] = {
            "dest": flag.field,
            "default": argparse.SUPPRESS,
            "help": f"{text} (env {flag.env}; default: {shown})".replace("%", "%%"),
        }
        if flag.kind == "switch":
            options["action"] = "store_true"
        else:
            options["type"] = flag.convert
            options["metavar"] = flag.metavar or ("|".join(flag.choices) or None)
            if flag.kind == "list":
                options["action"] = "append"
        parser.add_argument(*flag.flags, **options)


def resolve(
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    serve_table: Mapping[str, Any],
    *,
    source: str = "config",
) -> dict[str, Any]:
    """Settings values: each flag given, else its environment variable, else the config file's
    [serve] key, else left to the Settings default. A list adds the flag's values to the rest.
    Raises ValueError naming the variable or key whose value is wrong."""
    values: dict[str, Any] = {}
    unknown = set(serve_table) - {flag.key for flag in FLAGS if flag.in_file}
    if unknown:
        raise ValueError(
            f"{source}: serve.{sorted(unknown)[0]}: unknown key (see respond serve -h)"
        )
    for flag in FLAGS:
        text = environ.get(flag.env)
        try:
            if text:
                values[flag.field] = flag.value(text)
            elif flag.in_file and flag.key in serve_table:
                values[flag.field] = from_file(flag, serve_table[flag.key])
        except (argparse.ArgumentTypeError, ValueError) as exc:
            where = flag.env if text else f"{source}: serve.{flag.key}"
            raise ValueError(f"{where}: {exc}") from exc
        if flag.field in given:
            if flag.kind == "list":
                values[flag.field] = [*values.get(flag.field, []), *given[flag.field]]
            else:
                values[flag.field] = given[flag.field]
    return values


def from_file(flag: Flag, value: Any) -> Any:
    """A [serve] value, checked as the flag's text would be."""
    if flag.kind == "switch":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if flag.kind == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"must be a list of strings, got {value!r}")
        return [flag.convert(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a string or a number, got {value!r}")
    return flag.convert(str(value))


def readme_table(flags: Iterable[Flag] = FLAGS) -> str:
    """The README's `respond serve` table (tests/unit/test_flags.py keeps the two the same)."""
    rows = [
        "| flag | environment | `[serve]` key | default | |",
        "|---|---|---|---|---|",
    ]
    for flag in flags:
        metavar = flag.metavar or "|".join(flag.choices)
        name = ", ".join(flag.flags) + (f" {metavar}" if metavar else "")
        env = f"`{flag.env}`" + (" (comma list)" if flag.kind == "list" else "")
        key = f"`{flag.key}`" if flag.in_file else ""
        text = flag.readme or flag.help
        name = name.replace("|", "\\|")  # a | inside a table cell
        rows.append(f"| `{name}` | {env} | {key} | {flag.default_text()} | {text} |")
    return "\n".join(rows) + "\n"
