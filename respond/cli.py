"""`respond serve`. Flags follow llama-server where they overlap (-m, -c, --host, --alias...);
respond/_flags.py lists them, with their environment variables and config-file keys."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from respond._config import Settings
from respond._flags import FLAGS, add_to, resolve
from respond._logs import configure_logging

if TYPE_CHECKING:
    from respond._config_file import ConfigFile

__all__ = ["main", "parse_settings"]

_CONFIG = next(flag for flag in FLAGS if flag.field == "config_path")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="respond", description="An OpenAI Responses API server for local models."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve the Responses API",
        description="Serve the Responses API. Each flag has an environment variable and a key "
        "of the --config file's [serve] table; a flag beats its variable, which beats the file.",
    )
    add_to(serve)
    return parser


def parse_settings(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """`respond serve ARGS` as Settings: flags > environment (RESPOND_*) > [serve] > defaults.
    Exits with argparse's usage message (status 2) on a wrong value."""
    parser = _parser()
    args = parser.parse_args(argv)
    given: dict[str, Any] = {k: v for k, v in vars(args).items() if k != "command"}
    env = os.environ if environ is None else environ
    config = _config_file(given.get("config_path") or env.get(_CONFIG.env) or None)
    serve = config.serve if config is not None else {}
    try:
        values = resolve(given, env, serve, source=str(config.path) if config else "config")
    except ValueError as exc:
        parser.error(str(exc))
    return Settings(**values, config_file=config)


def _config_file(path: Path | str | None) -> ConfigFile | None:
    """The --config file, read once (None without one)."""
    from respond._config_file import ConfigError, read_config

    if path is None:
        return None
    try:
        return read_config(Path(path))
    except ConfigError as exc:
        raise SystemExit(f"respond: {exc}") from exc


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    configure_logging(settings.log_level, settings.log_format)
    from respond._server import build_server

    build_server(settings).run()
    _exit_now()


def _exit_now() -> None:
    """Exit as soon as the server has shut down. By then the store, the engines and the
    sandbox are closed; what the interpreter still does is free its ~1,200 modules and a
    loaded model one object at a time, 0.4 s that a supervisor (systemd, Kubernetes, a
    rolling restart, the test suite) waits for after every stop. So: what a normal exit
    does that matters (the other threads joined, the atexit handlers, the logs and the
    standard streams flushed), then os._exit."""
    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader gone: as at exit
            stream.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
