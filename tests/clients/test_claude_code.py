"""Claude Code (npm `@anthropic-ai/claude-code`, pinned in tests/clients/node) runs
`claude -p` against respond's Messages API, offline.

Claude Code is pointed at respond the way its docs describe a gateway: ANTHROPIC_BASE_URL,
ANTHROPIC_AUTH_TOKEN (sent as `Authorization: Bearer`) and ANTHROPIC_MODEL, with
non-essential traffic and telemetry off, a throwaway HOME and an empty working directory.
Its native binary ships in the optional package `@anthropic-ai/claude-code-linux-x64`;
npm 11 skips the wrapper's postinstall, so the binary is run directly.

(a) `--tools "" --system-prompt ...`: a short prompt the bundled model answers quickly.
(b) the full default prompt and tool set (about 48 KB, ~12k tokens; Claude Code sends
    adaptive thinking, output_config.effort, context_management, a `system` message
    inside `messages`), on a server started with `-c 16384`. The tiny model's reply may be
    nonsense; the turn must complete without a protocol error. CLAUDE_CODE_MAX_OUTPUT_TOKENS
    keeps its max_tokens (32000 by default) to 16 tokens on two cores. Under that
    prompt the 135M model at temperature 0 does not end its turn within them: respond
    answers `stop_reason: "max_tokens"`, Claude Code asks it to go on (three times, each a
    new request) and then ends with its own `max_output_tokens` error. That ending is the
    model's length, understood by the client; any protocol error would end differently.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server, start_server

NODE = Path(__file__).resolve().parent / "node"
ARCH = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
CLAUDE = NODE / "node_modules" / "@anthropic-ai" / f"claude-code-linux-{ARCH}" / "claude"
KEY = "claude-code-test-key"
PROMPT = "Reply with one word: yes or no?"


def serve(tmp: pytest.TempPathFactory, name: str, *extra: str) -> Server:
    if not CLAUDE.exists():
        pytest.fail("Claude Code is not installed: run `make node-clients` (part of `make test`)")
    return start_server(
        Path(tmp.mktemp(name)), "--threads", "2", "--temp", "0", "--api-key", KEY, *extra
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve(tmp_path_factory, "claude-small", "-n", "32")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve(tmp_path_factory, "claude-large", "-c", "16384")
    yield srv
    srv.stop()


def run_claude(
    tmp: Path,
    server: Server,
    *args: str,
    timeout: float,
    may_run_long: bool = False,
    max_output: int = 48,
) -> dict[str, Any]:
    """Claude Code's JSON result. `may_run_long`: the model may spend every output token
    (Claude Code then ends with `max_output_tokens`) as long as nothing else went wrong;
    `max_output`: CLAUDE_CODE_MAX_OUTPUT_TOKENS."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_AUTH_TOKEN": KEY,
        "ANTHROPIC_MODEL": BUNDLED_ALIAS,
        "ANTHROPIC_SMALL_FAST_MODEL": BUNDLED_ALIAS,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output),
        # A 12k-token prompt takes minutes on two busy cores: no client-side timeout first.
        "API_TIMEOUT_MS": str(int(timeout * 1000)),
    }
    done = subprocess.run(
        [str(CLAUDE), "-p", PROMPT, "--output-format", "json", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    detail = f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}\n{server.log()[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["type"] == "result" and result["subtype"] == "success", detail
    if may_run_long and result["is_error"]:
        assert result["api_error"] == "max_output_tokens", detail
        assert result["api_error_status"] is None, detail  # no HTTP error reached it
    else:
        assert done.returncode == 0 and result["is_error"] is False, detail
    # Every request it made was answered (a cancelled one is Claude Code's own choice).
    statuses = re.findall(r"POST /v1/messages(?:\?\S*)? (\d{3})", server.log())
    assert statuses and set(statuses) <= {"200", "499"}, detail
    return result


def test_claude_code_with_a_short_prompt_and_no_tools(small: Server, tmp_path: Path) -> None:
    result = run_claude(
        tmp_path,
        small,
        *("--tools", "", "--system-prompt", "You are a helpful assistant. Answer briefly."),
        timeout=600,
    )
    assert result["result"].strip()
    usage = result["usage"]
    assert usage["output_tokens"] >= 1
    assert "POST /v1/messages" in small.log()


def test_claude_code_with_its_full_default_prompt_and_tools(large: Server, tmp_path: Path) -> None:
    # Each of the four requests writes all its tokens at a 12k-token context: 16, not 48.
    result = run_claude(tmp_path, large, timeout=1500, may_run_long=True, max_output=16)
    usage = result["usage"]
    # ~12k prompt tokens were really sent and counted (input plus what the cache held).
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] > 8000
