"""Logging set-up: readable text lines, or one JSON object per line (`--log-format json`)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["JSONFormatter", "configure_logging"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JSONFormatter(logging.Formatter):
    """One JSON object per record; an access record adds its fields (request id, route...)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            entry.update(access)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # httpx logs every upstream request at INFO; the access log already has one line each.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # the mcp client's httpx
    # The mcp client logs what a server that is not MCP answered (its whole body, with a
    # traceback) as an error: a request naming a URL must not copy an internal service's
    # answer into the log (#32). respond.mcp logs each failure without it; debug shows all.
    if level.lower() != "debug":
        logging.getLogger("mcp.client").setLevel(logging.CRITICAL)
