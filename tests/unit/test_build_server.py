"""build_server(settings), the composition root `respond serve` runs, over the FAKE ScriptedEngine:
the settings reach the app (keys, store, request defaults) and the config file is read once."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import respond._config_file
from respond import Settings, build_server
from respond.engines import _base as d
from respond.testing import ScriptedEngine
from tests.support.inproc import serving_server
from tests.support.schema import validate_response


def test_the_settings_reach_the_served_app(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("hi"), d.Finish("stop"))
    settings = Settings(
        data_dir=tmp_path, embedding_model="none", api_key="k", n_predict=5, temperature=0.5
    )
    server = build_server(settings, engines={engine.info.id: engine}, banner=False)
    auth = {"Authorization": "Bearer k"}
    with serving_server(server) as url:
        refused = httpx.post(f"{url}/v1/responses", json={"input": "x"})
        reply = httpx.post(f"{url}/v1/responses", json={"input": "x"}, headers=auth)
        stored = httpx.get(f"{url}/v1/responses/{reply.json()['id']}", headers=auth)
    assert refused.status_code == 401
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["max_output_tokens"] == 5 and body["temperature"] == 0.5
    assert stored.status_code == 200 and stored.json()["output"] == body["output"]
    assert (tmp_path / "respond.sqlite3").is_file()  # the store: SQLite in the data dir


def test_the_config_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "respond.toml"
    config.write_text(
        "[serve]\nmax_tools = 3\n"
        "[models.far]\nupstream = 'http://127.0.0.1:9/v1'\n"
        "[mcp]\nallow = ['*.corp']\n"
    )
    reads: list[Path] = []
    read = respond._config_file._read

    def counted(path: Path) -> dict[str, object]:
        reads.append(path)
        return read(path)

    monkeypatch.setattr(respond._config_file, "_read", counted)
    from respond.cli import parse_settings

    settings = parse_settings(
        [
            "serve",
            "--config",
            str(config),
            "--data-dir",
            str(tmp_path),
            "--embedding-model",
            "none",
        ],
        {},
    )
    server = build_server(settings, banner=False)
    assert reads == [config]
    assert list(server.engines) == ["far"] and settings.limits.tools == 3
