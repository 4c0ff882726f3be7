"""Requests exactly as Codex CLI 0.171.0 sends them are accepted, over HTTP and WebSocket.

tests/clients/data/codex-0.171.0-request.json is a first-turn body recorded from `codex exec`
configured with a model Codex knows (so it sends its full tool set: function tools, a
`custom` apply_patch tool with a Lark grammar, `tool_search`, `web_search`), with the long
prompt texts shortened. docs/clients.md lists what each field is and what respond does
with it. Later turns replay the model's tool calls and their outputs as input items; those
shapes are built here the way Codex builds them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.schema import validate_event, validate_response
from tests.support.server import Server
from tests.support.sse import read_events
from tests.support.ws import socket, turn

RECORDED = Path(__file__).resolve().parent / "data" / "codex-0.171.0-request.json"


def recorded() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(RECORDED.read_text())
    body["model"] = BUNDLED_ALIAS
    # Codex sends no limit; the tiny model must not ramble on two shared cores.
    body["max_output_tokens"] = 8
    return body


def post_stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, timeout=120) as reply:
        if reply.status_code != 200:
            reply.read()
            raise AssertionError(f"{reply.status_code}: {reply.text}")
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    validate_response(events[-1]["response"])
    return events


def test_recorded_body_has_what_codex_sends() -> None:
    body = recorded()
    kinds = {tool["type"] for tool in body["tools"]}
    assert {"function", "custom", "tool_search", "web_search"} <= kinds
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["stream"] is True and "prompt_cache_key" in body and "client_metadata" in body


def test_first_turn_over_http(server: Server) -> None:
    events = post_stream(server, recorded())
    final = events[-1]["response"]
    assert final["status"] in ("completed", "incomplete")
    assert final["store"] is False
    assert final["prompt_cache_key"] == recorded()["prompt_cache_key"]


def test_warm_up_and_turn_over_websocket(server: Server) -> None:
    body = recorded()
    warm = {**copy.deepcopy(body), "generate": False, "input": body["input"][:1]}
    with socket(server) as conn:
        first = turn(conn, warm)
        assert first[-1]["type"] == "response.completed" and first[-1]["response"]["output"] == []
        chained = {
            **body,
            "previous_response_id": first[-1]["response"]["id"],
            "input": body["input"][1:],
        }
        events = turn(conn, chained)
    assert events[-1]["type"] in ("response.completed", "response.incomplete")


def test_function_call_round_trip_replayed(server: Server) -> None:
    body = recorded()
    body["input"] += [
        {
            "type": "function_call",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "ls"}),
            "call_id": "call_exec_1",
        },
        {
            "type": "function_call_output",
            "call_id": "call_exec_1",
            "output": "Chunk ID: 1\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\n",
        },
    ]
    events = post_stream(server, body)
    assert events[-1]["response"]["status"] in ("completed", "incomplete")


def test_custom_tool_call_round_trip_replayed(server: Server) -> None:
    body = recorded()
    body["input"] += [
        {
            "type": "custom_tool_call",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n",
            "call_id": "call_patch_1",
        },
        {"type": "custom_tool_call_output", "call_id": "call_patch_1", "output": "Done!"},
    ]
    reply = httpx.post(f"{server.base_url}/responses", json={**body, "stream": False}, timeout=120)
    assert reply.status_code == 200, reply.text
    validate_response(reply.json())
