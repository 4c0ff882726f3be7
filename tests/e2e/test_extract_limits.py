"""A PDF bomb against a real server with two tenants (#32): the bomb's file fails with a
clear `last_error` at the time cap, and the other tenant's requests stay fast meanwhile.

Before, a 3 KB PDF whose pages all show one big content stream was read by pypdf in a
thread of the server: seconds of CPU per page, holding the GIL every request needs, with
no cap at all. Now it is read in a child process (respond/files/_worker.py), killed at
`--extract-timeout`. The page and text caps are tried in tests/unit/test_extract_worker.py.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.clients import openai_client
from tests.support.pdfs import pdf_bomb
from tests.support.server import Server, start_server

TIMEOUT_S = 4  # --extract-timeout; the bomb (20 pages) costs pypdf over 30 s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("extract-limits"))
    keys = tmp / "keys"
    keys.write_text("alice:key-alice\nbob:key-bob\n")
    srv = start_server(
        tmp,
        "--threads", "1",
        "--api-key-file", str(keys),
        "--embedding-model", "none",
        "--extract-timeout", str(TIMEOUT_S),
    )  # fmt: skip
    yield srv
    srv.stop()


def latencies(server: Server, seconds: float) -> list[float]:
    """Bob's GET /v1/files, back to back for `seconds`: what another tenant sees."""
    out = []
    with httpx.Client(headers={"Authorization": "Bearer key-bob"}, timeout=30) as bob:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            bob.get(f"{server.base_url}/files").raise_for_status()
            out.append(time.perf_counter() - start)
            time.sleep(0.02)
    return out


def test_a_pdf_bomb_fails_at_the_time_cap_and_other_tenants_stay_fast(server: Server) -> None:
    baseline = statistics.median(latencies(server, 1.0))
    with openai_client(server.base_url, "key-alice") as alice:
        bomb = alice.files.create(file=("bomb.pdf", pdf_bomb(pages=20)), purpose="assistants")
        assert bomb.bytes < 8 * 1024
        store = alice.vector_stores.create(name="bomb")
        alice.vector_stores.files.create(vector_store_id=store.id, file_id=bomb.id)
        during = latencies(server, TIMEOUT_S - 1)
        deadline = time.monotonic() + 60
        while (
            entry := alice.vector_stores.files.retrieve(file_id=bomb.id, vector_store_id=store.id)
        ).status == "in_progress":
            assert time.monotonic() < deadline, "the bomb was never cut off"
            time.sleep(0.2)
    assert entry.status == "failed" and entry.last_error is not None
    assert entry.last_error.code == "invalid_file"
    assert f"longer than {TIMEOUT_S}s" in entry.last_error.message
    assert "--extract-timeout" in entry.last_error.message
    # While the bomb was read, another tenant's requests took about what they took before.
    assert statistics.median(during) < max(3 * baseline, 0.05), (baseline, during)
    assert max(during) < 1.0, (baseline, during)
    # And the server is still indexing: a plain file after the bomb completes.
    with openai_client(server.base_url, "key-alice") as alice:
        good = alice.files.create(file=("ok.txt", b"glaciers carve valleys"), purpose="assistants")
        done = alice.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=good.id)
        assert done.status == "completed"
