"""LlamaIndex (`llama-index-llms-openai`'s `OpenAIResponses`) runs a `FunctionAgent` against
the real server: a forced tool call, the tool's result sent back, and the model's answer.

LlamaIndex pins `openai<3` and respond's dev tools `openai` 3, so it lives in its own venv
(tests/clients/llamaindex/.venv, `make llamaindex`, part of `make test`) and the agent runs
there as a program (tests/clients/llamaindex/agent.py) printing what it did as JSON. Every
request LlamaIndex sends carries `"include": null`, which respond takes as absent.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server

HERE = Path(__file__).resolve().parent / "llamaindex"
PYTHON = HERE / ".venv" / "bin" / "python"


def test_function_agent_round_trip(server: Server) -> None:
    if not PYTHON.exists():
        pytest.fail("LlamaIndex is not installed: run `make llamaindex` (part of `make test`)")
    ran = subprocess.run(
        [str(PYTHON), str(HERE / "agent.py"), server.base_url, BUNDLED_ALIAS],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    outcome = json.loads(ran.stdout.strip().splitlines()[-1])
    assert outcome["calls"] == [{"name": "get_weather", "output": "Sunny in Paris."}]
    assert outcome["answer"].strip()
