"""The README's curl walkthrough, as a client would run it."""

from __future__ import annotations

import httpx

from tests.support.schema import validate_response
from tests.support.server import Server


def test_health_and_models(server: Server) -> None:
    # The default slots, none busy, and where the model runs (every layer on this CPU).
    idle = {"slots": 4, "busy_slots": 0, "queued": 0, "layers": "31/31 layers on CPU"}
    assert httpx.get(f"{server.url}/health").json() == {
        "status": "ok",
        "models": {"smollm2-135m": idle},
    }
    models = httpx.get(f"{server.base_url}/models").json()
    assert models["object"] == "list"
    entry, embedding = models["data"]  # the chat model, then the embedding model
    assert entry["id"] == "smollm2-135m"
    assert embedding["id"] == "all-minilm-l6-v2" and embedding["meta"]["type"] == "embedding"
    assert entry["object"] == "model"
    assert isinstance(entry["created"], int) and entry["owned_by"]
    assert entry["meta"]["n_ctx"] > 0
    assert models["models"][0]["name"] == "smollm2-135m"


def test_create_response_like_the_readme(server: Server) -> None:
    reply = httpx.post(
        f"{server.base_url}/responses",
        headers={"Authorization": "Bearer no-key"},
        json={
            "model": "smollm2-135m",
            "instructions": "Answer in one short sentence.",
            "input": "Write one short sentence about this local request.",
            "max_output_tokens": 32,
        },
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    validate_response(body)
    assert body["object"] == "response"
    assert body["model"] == "smollm2-135m"
    assert body["status"] in ("completed", "incomplete")
    if body["status"] == "incomplete":
        assert body["incomplete_details"] == {"reason": "max_output_tokens"}
        assert body["usage"]["output_tokens"] == 32
    else:
        assert body["completed_at"] >= body["created_at"]
    (message,) = body["output"]
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"][0]["type"] == "output_text"
    assert message["content"][0]["text"].strip()
    usage = body["usage"]
    assert usage["input_tokens"] > 10
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert body["instructions"] == "Answer in one short sentence."
