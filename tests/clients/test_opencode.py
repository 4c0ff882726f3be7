"""OpenCode (npm `opencode-ai`, pinned in tests/clients/node) runs `opencode run` against respond.

The configuration is the one docs/clients.md gives, read from that page (its base URL
changed to this server's, its timeout raised as the page advises for slow machines): an
`opencode.json` in the project naming a `respond` provider on `@ai-sdk/openai`, which
OpenCode bundles, so it talks the Responses API. OpenCode runs in a throwaway home with its
network fetches turned off by its own switches (models.dev's model list, self-update, LSP
downloads, sharing, its default plugins): the run needs nothing but the server.

OpenCode's prompt is about 7.2k tokens before the user's message (docs/clients.md says so):
the server gets the bundled model's whole 8k window in one slot.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import Server, start_server

ROOT = Path(__file__).resolve().parents[2]
OPENCODE = ROOT / "tests" / "clients" / "node" / "node_modules" / ".bin" / "opencode"
DOCS = ROOT / "docs" / "clients.md"
DOCS_URL = "http://127.0.0.1:8080/v1"
PROMPT = "Reply with one word: yes or no?"
# OpenCode's switches for what it would fetch from the network at start.
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    # OpenCode also installs `@opencode-ai/plugin` into its config folder in the background;
    # offline that install fails with a warning and the run goes on.
    "npm_config_offline": "true",
}


@pytest.fixture(scope="module")
def opencode_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if not OPENCODE.exists():
        pytest.fail("OpenCode is not installed: run `make node-clients` (part of `make test`)")
    srv = start_server(
        Path(tmp_path_factory.mktemp("opencode-server")),
        *("--threads", "2", "--temp", "0", "-c", "8192", "-np", "1"),
    )
    yield srv
    srv.stop()


def documented_config(base_url: str) -> dict[str, Any]:
    """The `opencode.json` block of docs/clients.md's OpenCode section, pointed at `base_url`."""
    section = DOCS.read_text().split("## OpenCode", 1)[1]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None, "docs/clients.md's OpenCode section has no opencode.json"
    assert DOCS_URL in block.group(1)
    config: dict[str, Any] = json.loads(block.group(1).replace(DOCS_URL, base_url))
    return config


def opencode_env(home: Path) -> dict[str, str]:
    """A home of its own (no user's config or cache), OpenCode's network fetches off."""
    xdg = {
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_STATE_HOME": home / ".local" / "state",
    }
    return {"PATH": os.environ["PATH"], "HOME": str(home), **OFFLINE} | {
        name: str(path) for name, path in xdg.items()
    }


def test_opencode_run_answers(opencode_server: Server, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = documented_config(opencode_server.base_url)
    # As the page advises for slow machines: reading the 7.2k-token prompt took 280 s of
    # OpenCode's default 300 s on a loaded two-core machine.
    config["provider"]["respond"]["options"]["timeout"] = 900_000
    (project / "opencode.json").write_text(json.dumps(config))
    ran = subprocess.run(
        [str(OPENCODE), "run", PROMPT],
        cwd=project,
        env=opencode_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert ran.stdout.strip(), ran.stderr[-4000:]
    # The answer came from respond: a Responses request with OpenCode's whole prompt.
    prompts = [
        int(found)
        for found in re.findall(
            r"POST /v1/responses 200 \d+ms tokens=(\d+)\+", opencode_server.log_path.read_text()
        )
    ]
    assert max(prompts) > 7000, prompts
