"""Serve the real HTTP stack over the FAKE scripted engine, in its own process.

    python -m tests.support.fake_server --script turns.json [--record turns.jsonl]
        [--secret-key K] [--reasoning-events openai|openresponses] --data-dir DIR
        --host 127.0.0.1 --port 8123 [respond serve's flags...]

Start it from a test with `start_fake_server(tmp, script)`; it is `build_server(settings)`
run exactly as `respond serve` runs it (its store in DIR, the defaults of every other
setting, or `respond serve` flags given after the others), with FakeEngine in place of the
model and no embedding model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from respond import build_server
from respond.cli import parse_settings
from respond.testing import FakeEngine, ScriptStep
from tests.support.server import Server, start_server


def start_fake_server(
    tmp: Path,
    script: Sequence[Sequence[ScriptStep]],
    *,
    secret_key: str = "fake-secret",
    reasoning_events: str = "openai",
    flags: Sequence[str] = (),
) -> tuple[Server, Path]:
    """Start the fake server; return it and the file where it records the turns it gets."""
    tmp.mkdir(parents=True, exist_ok=True)
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps([list(turn) for turn in script]))
    record = tmp / "turns.jsonl"
    server = start_server(
        tmp,
        "--script",
        str(script_path),
        "--record",
        str(record),
        "--secret-key",
        secret_key,
        "--reasoning-events",
        reasoning_events,
        "--data-dir",
        str(tmp / "data"),
        *flags,
        module=("-m", "tests.support.fake_server"),
    )
    return server, record


def recorded_turns(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--secret-key", default="fake-secret")
    parser.add_argument("--reasoning-events", default="openai", choices=["openai", "openresponses"])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, flags = parser.parse_known_args()
    engine = FakeEngine(json.loads(args.script.read_text()), record=args.record)
    settings = dataclasses.replace(
        parse_settings(["serve", *flags], environ={}),
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        secret_key=args.secret_key,
        reasoning_events=args.reasoning_events,
        embedding_model="none",
        log_level="warning",
    )
    build_server(settings, engines={engine.info.id: engine}, banner=False).run()


if __name__ == "__main__":
    main()
