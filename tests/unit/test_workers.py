"""How `make test`'s two pytest workers deal out the tests (tests/support/workers.py), shown on
a small suite run by pytest-xdist in a pytest of its own: a file's tests stay on one worker,
and every test marked `sandbox`, whatever its file, runs on one worker."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FOUR = "\n".join(f"def test_{n}():\n    pass\n" for n in range(4))
SANDBOXED = f"import pytest\n\npytestmark = pytest.mark.sandbox\n\n{FOUR}"


def test_a_file_stays_on_one_worker_and_the_sandbox_tests_share_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    # Only xdist: the other plugins installed would each be imported by three processes.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini("[pytest]\nmarkers =\n    sandbox: runs code in the sandbox\n")
    pytester.makeconftest('pytest_plugins = ["tests.support.workers"]\n')
    files = {f"test_plain_{n}": FOUR for n in range(4)}
    files |= {f"test_sandbox_{n}": SANDBOXED for n in range(3)}
    pytester.makepyfile(**files)

    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--dist", "loadfile", "-v")

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
