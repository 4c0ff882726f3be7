"""API keys: --api-key, --api-key-file (name:key lines), RESPOND_API_KEY; /health stays open."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.support.server import start_server


def ask(url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    body = {"input": "x", "max_output_tokens": 1}
    return httpx.post(f"{url}/v1/responses", json=body, headers=headers, timeout=60).status_code


def test_api_key_flag_and_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# tenants\nalice:key-alice\nkey-plain\n")
    server = start_server(tmp_path, "--api-key", "key-flag", "--api-key-file", str(keys))
    try:
        assert httpx.get(f"{server.url}/health").status_code == 200
        for good in ("key-flag", "key-alice", "key-plain"):
            assert ask(server.url, good) == 200
        for bad in (None, "wrong", "alice:key-alice", "key-flag-and-more"):
            assert ask(server.url, bad) == 401
        reply = httpx.get(f"{server.base_url}/models")
        assert reply.status_code == 401
        assert reply.json()["error"]["code"] == "invalid_api_key"
        with (
            openai.OpenAI(base_url=server.base_url, api_key="wrong") as wrong,
            pytest.raises(openai.AuthenticationError),
        ):
            wrong.models.list()
        with openai.OpenAI(base_url=server.base_url, api_key="key-plain") as plain:
            assert plain.models.list().data
    finally:
        server.stop()


def test_api_key_from_environment(tmp_path: Path) -> None:
    server = start_server(tmp_path, env={"RESPOND_API_KEY": "env-key"})
    try:
        assert ask(server.url, "env-key") == 200
        assert ask(server.url, "other") == 401
    finally:
        server.stop()


def test_without_keys_any_header_is_accepted(server: object) -> None:
    url = server.url  # type: ignore[attr-defined]
    assert ask(url, None) == 200
    assert ask(url, "anything") == 200
