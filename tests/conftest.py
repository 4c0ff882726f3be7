from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import openai
import pytest

from tests.support import outside, processes
from tests.support import server as servers
from tests.support.clients import openai_client
from tests.support.server import Server, start_server
from tests.support.stores import PG_URL, pg_address

# Fixtures every suite's tests share: the FAKE SearXNG and its pages (`searxng`, `pages`);
# how pytest workers deal out the tests (`make test PYTEST_WORKERS=N`: tests/support/workers.py);
# pytester, which tests/unit/test_workers.py runs a small suite with.
pytest_plugins = ["tests.support.fake_searxng", "tests.support.workers", "pytester"]

# Nothing the suite reads may lie beside the checkout: a fresh clone has nothing there.
sys.addaudithook(outside.record)


def _terminated(signum: int, frame: FrameType | None) -> None:
    # SIGTERM (`timeout`, a CI runner giving up, kill) ends the session as Ctrl-C does:
    # pytest unwinds, and pytest_sessionfinish stops every process the tests started. Passed
    # on to the children first: pytest-xdist's workers (PYTEST_WORKERS) are this process's
    # children, and each stops what it started only when it is told to.
    for child in processes.children():
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _terminated)

# Each suite is a folder; `pytest -m unit` runs the fast one alone.
_SUITES = ("unit", "native", "e2e", "clients")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    pg_reason = _pg_unreachable()
    for item in items:
        suite = Path(str(item.path)).parent.name
        if suite in _SUITES:
            item.add_marker(getattr(pytest.mark, suite))
        # Outside CI a machine may have no PostgreSQL; in CI (CI=true) the tests must run.
        if pg_reason and item.get_closest_marker("pg") and not os.environ.get("CI"):
            item.add_marker(pytest.mark.skip(reason=pg_reason))


# What the xdist workers found at their end, for the controller to report.
_WORKERS_FOUND: list[str] = []


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the session's fixtures
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    failures = []
    if outside.reads:
        failures.append(
            f"read beside the checkout {outside.CHECKOUT}: {sorted(set(outside.reads))}"
        )
    left = processes.stop_all()
    if left:
        failures.append(f"left processes running (stopped now): {left}")
    to_controller: dict[str, object] | None = getattr(session.config, "workeroutput", None)
    if to_controller is not None:  # an xdist worker: its exit status does not reach the end
        to_controller["respond_found"] = failures
        return
    failures += _WORKERS_FOUND
    if failures:
        print("\nThe tests " + "\nThe tests ".join(failures))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object | None) -> None:
    # A worker that crashed sent nothing; xdist reports the crash itself.
    _WORKERS_FOUND.extend(getattr(node, "workeroutput", {}).get("respond_found", []))


# Each test's view of the server logs at its start (see pytest_runtest_makereport).
_LOG_SIZES = pytest.StashKey[dict[Path, int]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_LOG_SIZES] = servers.log_sizes()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    """A failed test's report shows what the respond servers logged during it: a 500 in CI
    is otherwise a message without its traceback."""
    report: pytest.TestReport = yield
    if report.failed and _LOG_SIZES in item.stash:
        said = servers.logged_since(item.stash[_LOG_SIZES])
        if said:
            report.sections.append(("respond servers' logs during the test", said))
    return report


def _pg_unreachable() -> str | None:
    host, port = pg_address()
    try:
        with socket.create_connection((host, port), timeout=1):
            return None
    except OSError as exc:
        return f"PostgreSQL is not reachable at {PG_URL} ({exc}); set RESPOND_TEST_PG"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real respond process serving the bundled model, shared by the e2e tests."""
    # Loopback MCP servers on: tests/clients/test_agents_sdk_mcp.py and test_mcp_everything.py
    # point requests at MCP servers they start on 127.0.0.1 (off by default, #32).
    srv = start_server(
        Path(tmp_path_factory.mktemp("server")), "--threads", "2", "--mcp-allow-loopback"
    )
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    """The `openai` SDK pointed at `server`; every body and event is checked against the spec."""
    sdk = openai_client(server.base_url)
    yield sdk
    sdk.close()
