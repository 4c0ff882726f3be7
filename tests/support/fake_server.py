"""Serve the real HTTP stack over the FAKE scripted engine, in its own process.

    python -m tests.support.fake_server --script turns.json [--record turns.jsonl]
        [--secret-key K] --host 127.0.0.1 --port 8123

Start it from a test with `start_fake_server(tmp, script)`; it is `respond.app.create_app`
under uvicorn exactly as `respond serve` runs it, with FakeEngine in place of the model.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from respond.app import create_app
from respond.responses.sealing import Sealer, load_key
from respond.testing import FakeEngine, ScriptStep
from tests.support.server import Server, start_server


def start_fake_server(
    tmp: Path, script: Sequence[Sequence[ScriptStep]], *, secret_key: str = "fake-secret"
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
        module=("-m", "tests.support.fake_server"),
    )
    return server, record


def recorded_turns(record: Path) -> list[dict[str, object]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--secret-key", default="fake-secret")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    engine = FakeEngine(json.loads(args.script.read_text()), record=args.record)
    sealer = Sealer(load_key(args.secret_key, Path(".")))
    app = create_app({engine.info.id: engine}, sealer=sealer)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
