from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.clients import openai_client
from tests.support.server import Server, start_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real respond process serving the bundled model, shared by the e2e tests."""
    srv = start_server(Path(tmp_path_factory.mktemp("server")), "--threads", "2")
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    """The `openai` SDK pointed at `server`; every body and event is checked against the spec."""
    sdk = openai_client(server.base_url)
    yield sdk
    sdk.close()
