"""`respond serve --config respond.toml`: read once and validated on start.

A `[serve]` table sets any of `respond serve`'s settings by its long flag's name (`ctx_size = 8192`
for `--ctx-size`; respond/_flags.py lists them); a flag or an environment variable beats it.

Each `[models.NAME]` table is either an embedded GGUF (`gguf = "bundled"` or a path, or
`hf = "OWNER/NAME:QUANT"` fetched from the Hugging Face hub) or an upstream pool
(`upstream = "http://host:8000/v1"` or a list of base URLs). Every mistake is reported with
the key it concerns, e.g. `models.qwen.timeouts.idle`. See docs/upstreams.md for the reference.

An `[mcp]` table declares remote MCP servers (`[mcp.servers.NAME] url = ...`) and the
egress allow-list (`allow = [...]`); see docs/tools.md. A file may hold only that table:
the models then come from the command line.

An `[embeddings]` table points the embedding model at an upstream's `/embeddings`
(docs/files.md); it too may be a file's only table.

A `[web_search]` table chooses the web_search tool's provider (`provider`, `url`, `api_key`
or `api_key_env`, `timeout`, `allow_private`); the --web-search flags beat its keys.
"""

from __future__ import annotations

import os
import tomllib
from argparse import ArgumentTypeError
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from respond._config import (
    DEFAULTS,
    ConfigFile,
    EmbeddedModel,
    EmbeddingsUpstream,
    McpServerConfig,
    McpSettings,
    ModelEntry,
    Settings,
    Timeouts,
    UpstreamModel,
    WebSearchSettings,
)
from respond._flags import PLACEMENT_FLAGS, from_file
from respond._hub import split_spec

# The types a file's tables become live in _config.py (beside Settings); named here too.
__all__ = [
    "ConfigError",
    "ConfigFile",
    "EmbeddedModel",
    "EmbeddingsUpstream",
    "ModelEntry",
    "UpstreamModel",
    "config_of",
    "load_config",
    "load_embeddings_config",
    "load_mcp_config",
    "mcp_settings",
    "read_config",
    "web_search_settings",
]


class ConfigError(ValueError):
    """The config file is wrong; the message names the file and the key."""


_TABLES = ("serve", "models", "mcp", "embeddings", "web_search")
PLACEMENT_KEYS = {flag.key for flag in PLACEMENT_FLAGS}
_EMBEDDED_KEYS = {
    "gguf",
    "hf",
    "hf_file",
    "ctx_size",
    "threads",
    "seed",
    "parallel",
    "queue_max",
    "chat_template_file",
    "cache_ram",
    "mmproj",
    *PLACEMENT_KEYS,
}
_UPSTREAM_KEYS = {
    "upstream",
    "api",
    "model",
    "api_key",
    "api_key_env",
    "timeouts",
    "max_tokens_param",
    "send_reasoning",
    "vision",
    "forced_calls",
    "grammars",
    "context_window",
}
_TIMEOUT_KEYS = {"connect", "first_byte", "idle", "probe_interval"}
_EMBEDDINGS_KEYS = {
    *("upstream", "model", "name", "api_key", "api_key_env", "timeout", "max_chars"),
    "start_wait",
}
_MCP_KEYS = {"servers", "allow", "timeout"}
_WEB_SEARCH_KEYS = {"provider", "url", "api_key", "api_key_env", "timeout", "allow_private"}
PROVIDERS = ("searxng", "brave", "tavily")
_MCP_SERVER_KEYS = {"url", "headers", "require_approval", "description"}


def read_config(path: Path) -> ConfigFile:
    """The whole file, read and checked once. Raises ConfigError naming the key."""
    data = _read(path)
    reader = _Reader(str(path))
    models = reader.models(data)
    serve = data.get("serve", {})
    if not isinstance(serve, dict):
        raise reader.fail("serve", "must be a table of respond serve's settings")
    servers, allow, timeout = reader.mcp(data.get("mcp", {}))
    embeddings = data.get("embeddings")
    return ConfigFile(
        path=path,
        serve=serve,
        models=models,
        mcp_servers=servers,
        mcp_allow=allow,
        mcp_timeout=timeout,
        embeddings=None if embeddings is None else reader.embeddings(embeddings),
        web_search=reader.web_search(data.get("web_search", {})),
    )


def config_of(settings: Settings) -> ConfigFile | None:
    """The settings' config file: as already read, else read now; None without one."""
    if settings.config_file is not None or settings.config_path is None:
        return settings.config_file
    return read_config(settings.config_path)


def mcp_settings(
    config: ConfigFile | None,
    *,
    allow: tuple[str, ...] = (),
    timeout: float = DEFAULTS.mcp_timeout,
    allow_loopback: bool = False,
) -> McpSettings:
    """The [mcp] table, with the command line's allow patterns added to the file's (the file's
    timeout, when it sets one, wins over the command line's)."""
    if config is None:
        return McpSettings(allow=allow, timeout=timeout, allow_loopback=allow_loopback)
    return McpSettings(
        servers=config.mcp_servers,
        allow=(*config.mcp_allow, *allow),
        timeout=timeout if config.mcp_timeout is None else config.mcp_timeout,
        allow_loopback=allow_loopback,
    )


def web_search_settings(config: ConfigFile | None, settings: Settings) -> WebSearchSettings | None:
    """The web_search provider: the --web-search flags over the [web_search] table; None
    when neither names a provider. A provider without what it needs stops the start."""
    table = {} if config is None else dict(config.web_search)
    given = {
        "provider": settings.web_search,
        "url": settings.web_search_url,
        "api_key": settings.web_search_key,
        "timeout": settings.web_search_timeout,
    }
    table.update({key: value for key, value in given.items() if value is not None})
    if settings.web_search_allow_private:
        table["allow_private"] = True
    provider = table.pop("provider", None)
    if provider is None:
        if table:
            raise ConfigError(
                "web_search: the search provider is not named: set --web-search (or provider "
                "in [web_search]) to searxng, brave or tavily"
            )
        return None
    if provider == "searxng" and not table.get("url"):
        raise ConfigError(
            "web_search: searxng needs the instance's base URL: --web-search-url (or url in "
            "[web_search]), e.g. http://localhost:8888"
        )
    if provider != "searxng" and not table.get("api_key"):
        raise ConfigError(
            f"web_search: {provider} needs an API key: --web-search-key (or "
            "RESPOND_WEB_SEARCH_KEY, or api_key / api_key_env in [web_search])"
        )
    url = table.get("url")
    if url is not None and not str(url).startswith(("http://", "https://")):
        raise ConfigError(f"web_search: the URL must be http(s): {url!r}")
    return WebSearchSettings(provider=provider, **table)


def load_config(path: Path) -> list[ModelEntry]:
    """The models of a config file (none when it holds no [models] table)."""
    return read_config(path).models


def load_mcp_config(
    path: Path | None, *, allow: tuple[str, ...] = (), timeout: float = DEFAULTS.mcp_timeout
) -> McpSettings:
    """The [mcp] table, with the command line's allow patterns added to the file's."""
    return mcp_settings(None if path is None else read_config(path), allow=allow, timeout=timeout)


def load_embeddings_config(path: Path | None) -> EmbeddingsUpstream | None:
    """The [embeddings] table; None when there is no file or it has none."""
    return None if path is None else read_config(path).embeddings


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key}: {message}")

    def models(self, data: Mapping[str, Any]) -> list[ModelEntry]:
        unknown = set(data) - set(_TABLES)
        if unknown:
            raise self.fail(
                sorted(unknown)[0],
                "unknown key (expected [serve], [models.NAME], [mcp], [embeddings] and "
                "[web_search] tables)",
            )
        if "models" not in data and any(table in data for table in _TABLES):
            return []
        models = data.get("models")
        if not isinstance(models, dict) or not models:
            raise self.fail("models", "define at least one [models.NAME] table")
        return [self.model(f"models.{name}", name, table) for name, table in models.items()]

    def model(self, key: str, alias: str, table: Any) -> ModelEntry:
        if not isinstance(table, dict):
            raise self.fail(key, "must be a table")
        if [name in table for name in ("gguf", "hf", "upstream")].count(True) != 1:
            raise self.fail(
                key,
                'set exactly one of "gguf" (a file), "hf" (from the Hugging Face hub) or '
                '"upstream" (a pool)',
            )
        if "upstream" not in table:
            return self.embedded(key, alias, table)
        return self.upstream(key, alias, table)

    def embedded(self, key: str, alias: str, table: dict[str, Any]) -> EmbeddedModel:
        self.known(key, table, _EMBEDDED_KEYS)
        hf = self.optional_str(f"{key}.hf", table.get("hf"))
        if hf is not None:
            try:
                split_spec(hf)
            except ValueError as exc:
                raise self.fail(f"{key}.hf", str(exc)) from exc
        elif "hf_file" in table:
            raise self.fail(f"{key}.hf_file", 'names a file of the "hf" repo; set "hf" too')
        gguf = self.string(f"{key}.gguf", table.get("gguf", "bundled"))
        path = None if gguf == "bundled" else Path(gguf).expanduser()
        if path is not None and not path.is_file():
            raise self.fail(f"{key}.gguf", f"file not found: {path}")
        return EmbeddedModel(
            alias=alias,
            gguf=path,
            hf=hf,
            hf_file=self.optional_str(f"{key}.hf_file", table.get("hf_file")),
            ctx_size=self.integer(
                f"{key}.ctx_size", table.get("ctx_size", DEFAULTS.n_ctx), minimum=256
            ),
            threads=self.optional_int(f"{key}.threads", table.get("threads")),
            seed=self.optional_int(f"{key}.seed", table.get("seed"), minimum=None),
            parallel=self.integer(f"{key}.parallel", table.get("parallel", DEFAULTS.n_slots)),
            queue_max=self.integer(
                f"{key}.queue_max", table.get("queue_max", DEFAULTS.queue_max), minimum=0
            ),
            chat_template_file=self.optional_file(
                f"{key}.chat_template_file", table.get("chat_template_file")
            ),
            cache_ram=self.integer(
                f"{key}.cache_ram", table.get("cache_ram", DEFAULTS.cache_ram_mb), minimum=0
            ),
            mmproj=self.optional_file(f"{key}.mmproj", table.get("mmproj")),
            placement=self.placement(key, table),
        )

    def placement(self, key: str, table: dict[str, Any]) -> dict[str, Any]:
        """The placement keys the table sets (as flags, read as the flag's text would be)."""
        chosen = {}
        for flag in PLACEMENT_FLAGS:
            if flag.key in table:
                try:
                    chosen[flag.field] = from_file(flag, table[flag.key])
                except (ArgumentTypeError, ValueError) as exc:
                    raise self.fail(f"{key}.{flag.key}", str(exc)) from exc
        return chosen

    def upstream(self, key: str, alias: str, table: dict[str, Any]) -> UpstreamModel:
        self.known(key, table, _UPSTREAM_KEYS)
        urls = table["upstream"]
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls:
            raise self.fail(f"{key}.upstream", "must be a base URL or a non-empty list of them")
        for index, url in enumerate(urls):
            where = f"{key}.upstream[{index}]" if len(urls) > 1 else f"{key}.upstream"
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise self.fail(where, f"must be an http(s) base URL like http://host/v1: {url!r}")
        api = table.get("api", "chat")
        if api not in ("chat", "responses"):
            raise self.fail(f"{key}.api", f'must be "chat" or "responses", got {api!r}')
        param = table.get("max_tokens_param", "max_tokens")
        if param not in ("max_tokens", "max_completion_tokens"):
            raise self.fail(
                f"{key}.max_tokens_param",
                f'must be "max_tokens" or "max_completion_tokens", got {param!r}',
            )
        forced = table.get("forced_calls", "structured")
        if forced not in ("structured", "native"):
            raise self.fail(
                f"{key}.forced_calls", f'must be "structured" or "native", got {forced!r}'
            )
        grammars = table.get("grammars", "auto")
        if grammars not in ("auto", "gbnf", "check"):
            raise self.fail(
                f"{key}.grammars", f'must be "auto", "gbnf" or "check", got {grammars!r}'
            )
        return UpstreamModel(
            alias=alias,
            urls=tuple(u.rstrip("/") for u in urls),
            api=cast(Literal["chat", "responses"], api),
            model=self.optional_str(f"{key}.model", table.get("model")),
            api_key=self.api_key(key, table),
            timeouts=self.timeouts(f"{key}.timeouts", table.get("timeouts", {})),
            max_tokens_param=cast(Literal["max_tokens", "max_completion_tokens"], param),
            send_reasoning=self.boolean(f"{key}.send_reasoning", table.get("send_reasoning", True)),
            vision=self.boolean(f"{key}.vision", table.get("vision", True)),
            forced_calls=cast(Literal["structured", "native"], forced),
            grammars=cast(Literal["auto", "gbnf", "check"], grammars),
            context_window=self.context_window(key, table),
        )

    def context_window(self, key: str, table: dict[str, Any]) -> int | None:
        if "context_window" not in table:
            return None
        return self.integer(f"{key}.context_window", table["context_window"], minimum=16)

    def api_key(self, key: str, table: dict[str, Any]) -> str | None:
        if "api_key" in table and "api_key_env" in table:
            raise self.fail(key, 'set "api_key" or "api_key_env", not both')
        if "api_key_env" in table:
            name = self.string(f"{key}.api_key_env", table["api_key_env"])
            value = os.environ.get(name)
            if not value:
                raise self.fail(f"{key}.api_key_env", f"the environment variable {name} is not set")
            return value
        return self.optional_str(f"{key}.api_key", table.get("api_key"))

    def timeouts(self, key: str, table: Any) -> Timeouts:
        if not isinstance(table, dict):
            raise self.fail(key, "must be a table like { connect = 5, first_byte = 120 }")
        self.known(key, table, _TIMEOUT_KEYS)
        values = {}
        for name in _TIMEOUT_KEYS & set(table):
            values[name] = self.seconds(f"{key}.{name}", table[name])
        return Timeouts(**values)

    # ------------------------------------------------------------ embeddings

    def embeddings(self, table: Any) -> EmbeddingsUpstream:
        if not isinstance(table, dict):
            raise self.fail("embeddings", "must be a table")
        self.known("embeddings", table, _EMBEDDINGS_KEYS)
        url = self.string("embeddings.upstream", table.get("upstream"))
        if not url.startswith(("http://", "https://")):
            raise self.fail(
                "embeddings.upstream", f"must be an http(s) base URL like http://host/v1: {url!r}"
            )
        model = self.string("embeddings.model", table.get("model"))
        return EmbeddingsUpstream(
            url=url.rstrip("/"),
            model=model,
            name=self.optional_str("embeddings.name", table.get("name")) or model,
            api_key=self.api_key("embeddings", table),
            timeout=self.seconds("embeddings.timeout", table.get("timeout", 60.0)),
            max_chars=self.optional_int("embeddings.max_chars", table.get("max_chars")),
            start_wait=self.seconds("embeddings.start_wait", table.get("start_wait", 30.0)),
        )

    def seconds(self, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(key, f"must be a positive number of seconds: {value!r}")
        return float(value)

    # ------------------------------------------------------------ web_search

    def web_search(self, table: Any) -> dict[str, Any]:
        """The [web_search] table's keys, checked (web_search_settings merges the flags)."""
        if not isinstance(table, dict):
            raise self.fail("web_search", "must be a table")
        self.known("web_search", table, _WEB_SEARCH_KEYS)
        found: dict[str, Any] = {}
        if "provider" in table:
            provider = table["provider"]
            if provider not in PROVIDERS:
                raise self.fail(
                    "web_search.provider", f"must be one of {', '.join(PROVIDERS)}: {provider!r}"
                )
            found["provider"] = provider
        if "url" in table:
            url = self.string("web_search.url", table["url"])
            if not url.startswith(("http://", "https://")):
                raise self.fail("web_search.url", f"must be an http(s) URL: {url!r}")
            found["url"] = url
        key = self.api_key("web_search", table)
        if key is not None:
            found["api_key"] = key
        if "timeout" in table:
            found["timeout"] = self.seconds("web_search.timeout", table["timeout"])
        if "allow_private" in table:
            found["allow_private"] = self.boolean(
                "web_search.allow_private", table["allow_private"]
            )
        return found

    # ------------------------------------------------------------ mcp

    def mcp(self, table: Any) -> tuple[dict[str, McpServerConfig], tuple[str, ...], float | None]:
        """The [mcp] table's servers, allow patterns and timeout (None: not set)."""
        if not isinstance(table, dict):
            raise self.fail("mcp", "must be a table")
        self.known("mcp", table, _MCP_KEYS)
        patterns = table.get("allow", [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise self.fail("mcp.allow", 'must be a list of URL or host patterns, like ["*.corp"]')
        timeout = None
        if "timeout" in table:
            timeout = self.seconds("mcp.timeout", table["timeout"])
        servers = table.get("servers", {})
        if not isinstance(servers, dict):
            raise self.fail("mcp.servers", "must be a table of [mcp.servers.NAME] tables")
        configured = {
            name: self.mcp_server(f"mcp.servers.{name}", name, server)
            for name, server in servers.items()
        }
        return configured, tuple(patterns), timeout

    def mcp_server(self, key: str, name: str, table: Any) -> McpServerConfig:
        if not isinstance(table, dict):
            raise self.fail(key, "must be a table")
        self.known(key, table, _MCP_SERVER_KEYS)
        url = self.string(f"{key}.url", table.get("url"))
        if not url.startswith(("http://", "https://")):
            raise self.fail(f"{key}.url", f"must be an http(s) URL: {url!r}")
        headers = table.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise self.fail(f"{key}.headers", "must be a table of strings")
        approval = table.get("require_approval")
        if approval not in (None, "always", "never") and not isinstance(approval, dict):
            raise self.fail(
                f"{key}.require_approval",
                'must be "always", "never" or a table like { never = { tool_names = [...] } }',
            )
        return McpServerConfig(
            name=name,
            url=url,
            headers=dict(headers),
            require_approval=approval,
            description=self.optional_str(f"{key}.description", table.get("description")),
        )

    # ------------------------------------------------------------ scalars

    def known(self, key: str, table: dict[str, Any], allowed: set[str]) -> None:
        for name in table:
            if name not in allowed:
                choices = ", ".join(sorted(allowed))
                raise self.fail(f"{key}.{name}", f"unknown key (known: {choices})")

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def optional_str(self, key: str, value: Any) -> str | None:
        return None if value is None else self.string(key, value)

    def optional_file(self, key: str, value: Any) -> Path | None:
        if value is None:
            return None
        path = Path(self.string(key, value)).expanduser()
        if not path.is_file():
            raise self.fail(key, f"file not found: {path}")
        return path

    def boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def integer(self, key: str, value: Any, *, minimum: int | None = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        return value

    def optional_int(self, key: str, value: Any, *, minimum: int | None = 1) -> int | None:
        return None if value is None else self.integer(key, value, minimum=minimum)
