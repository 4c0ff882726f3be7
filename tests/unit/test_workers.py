"""How pytest workers deal out the tests (tests/support/workers.py; `make unit`, or any suite
target with PYTEST_WORKERS), shown on a small suite run by pytest-xdist in a pytest of its own:
a file's tests stay on one worker, and every file marked `sandbox` runs on one worker."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FOUR = "\n".join(f"def test_{n}():\n    pass\n" for n in range(4))
SANDBOXED = f"import pytest\n\npytestmark = pytest.mark.sandbox\n\n{FOUR}"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An empty suite with tests/support/workers.py as its plugin."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    # Only xdist: the other plugins installed would each be imported by three processes.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini("[pytest]\nmarkers =\n    sandbox: runs code in the sandbox\n")
    pytester.makeconftest('pytest_plugins = ["tests.support.workers"]\n')
    return pytester


def test_a_file_stays_on_one_worker_and_the_sandbox_tests_share_one(
    suite: pytest.Pytester,
) -> None:
    files = {f"test_plain_{n}": FOUR for n in range(4)}
    files |= {f"test_sandbox_{n}": SANDBOXED for n in range(3)}
    suite.makepyfile(**files)

    result = suite.runpytest_subprocess("-p", "xdist", "-n", "2", "--dist", "loadfile", "-v")

    result.assert_outcomes(passed=28)
    workers: dict[str, set[str]] = defaultdict(set)
    for line in result.outlines:
        ran = re.match(r"\[(gw\d)\] .*PASSED (test_\w+)\.py::", line)
        if ran:
            workers[ran[2]].add(ran[1])
    assert len(workers) == 7 and all(len(on) == 1 for on in workers.values()), workers
    assert (
        len({*workers["test_sandbox_0"], *workers["test_sandbox_1"], *workers["test_sandbox_2"]})
        == 1
    )
    # Both workers had work: a file is a unit, not the whole suite.
    assert set().union(*workers.values()) == {"gw0", "gw1"}


def test_a_sandbox_mark_on_one_test_is_refused(suite: pytest.Pytester) -> None:
    # The controller groups whole files: a test marked alone would run beside the group.
    suite.makepyfile(test_one="import pytest\n\n@pytest.mark.sandbox\ndef test_x():\n    pass\n")
    result = suite.runpytest_subprocess("-p", "xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_one.py::test_x: mark the whole file sandbox*"])
