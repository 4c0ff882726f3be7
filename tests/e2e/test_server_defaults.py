"""`-n/--n-predict` and `--temp`: server defaults for requests that leave the field out; the
modes of what the server keeps on disk."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.schema import validate_response
from tests.support.server import Server, start_server


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("capped")), "--threads", "2", "-n", "4", "--temp", "0.25"
    )
    yield srv
    srv.stop()


def create(server: Server, **body: object) -> dict[str, object]:
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    data: dict[str, object] = reply.json()
    validate_response(data)
    return data


def test_defaults_apply_when_the_request_sets_none(capped: Server) -> None:
    response = create(capped, input="Write a long story about a dragon.")
    assert response["max_output_tokens"] == 4 and response["temperature"] == 0.25
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    usage = response["usage"]
    assert isinstance(usage, dict) and usage["output_tokens"] == 4


def test_the_request_wins(capped: Server) -> None:
    response = create(capped, input="Hi", max_output_tokens=6, temperature=0)
    assert response["max_output_tokens"] == 6 and response["temperature"] == 0


def test_state_on_disk_is_readable_by_responds_user_only(capped: Server) -> None:
    """Every tenant's responses lie in the data dir: no other local user may read them."""
    create(capped, input="Hi", max_output_tokens=2)  # stored: the WAL and its index exist
    args = [str(arg) for arg in capped.process.args]  # type: ignore[union-attr]
    data_dir = Path(args[args.index("--data-dir") + 1])
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data_dir.iterdir()}
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for name in ("respond.sqlite3", "respond.sqlite3-wal", "respond.sqlite3-shm", "secret.key"):
        assert modes[name] == 0o600, modes
