"""The Vercel AI SDK (npm `ai` with `@ai-sdk/openai` and `@ai-sdk/open-responses`) against respond.

Each case runs tests/clients/node/ai_sdk.mjs in node against the real server; the script
exits non-zero when the SDK throws or gets something it cannot use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server

NODE_DIR = Path(__file__).resolve().parent / "node"
PROVIDERS = ("openai", "open-responses")


def run_case(server: Server, provider: str, case: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / "ai").exists():
        pytest.fail("node or the AI SDK is not installed: run `make node-clients`")
    done = subprocess.run(
        [node, "ai_sdk.mjs", provider, case, server.base_url, BUNDLED_ALIAS],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=900,  # generous: the machine running the tests may be loaded
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{done.stderr}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert done.returncode == 0 and result["ok"], result.get("error", done.stderr)
    assert result.get("warnings", []) == [], result["warnings"]
    return result


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generate_text(server: Server, provider: str) -> None:
    result = run_case(server, provider, "generateText")
    assert result["id"].startswith("resp_")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_text(server: Server, provider: str) -> None:
    result = run_case(server, provider, "streamText")
    assert {"text-start", "text-delta", "text-end", "finish"} <= set(result["parts"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_forced_tool_call(server: Server, provider: str) -> None:
    """A named tool with parallel calls allowed: the call's repeats end the turn."""
    result = run_case(server, provider, "toolCall")
    assert [call["name"] for call in result["toolCalls"]] == ["weather"]
    assert isinstance(result["toolCalls"][0]["input"]["city"], str)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_required_non_strict_zod_tool(server: Server, provider: str) -> None:
    """toolChoice 'required' and a tool sent without strict (the AI SDK's default), whose
    zod schema has int() and min/max: the call validates against the tool's schema."""
    result = run_case(server, provider, "requiredToolCall")
    call = result["toolCalls"][0]
    assert call["name"] == "forecast" and 1 <= call["input"]["days"] <= 7


@pytest.mark.parametrize("case", ["generateObject", "outputObject"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_structured_object(server: Server, provider: str, case: str) -> None:
    result = run_case(server, provider, case)
    assert isinstance(result["object"]["population"], int | float)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_zod_integer_schema(server: Server, provider: str) -> None:
    """z.number().int() sends minimum/maximum at +-(2^53-1): enforced (at no cost)."""
    result = run_case(server, provider, "intObject")
    assert isinstance(result["object"]["population"], int)
