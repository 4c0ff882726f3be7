"""Hosted MCP tools end to end: the real server and model, real MCP servers, the openai SDK.

The MCP server is the `mcp` package's MCPServer on loopback (tests/support/mcp_server.py)
with deterministic tools. The bundled model is tiny, so calls are forced (tool_choice) and
`max_tool_calls=1` leaves the turn after the call to text: the tests assert what respond
runs, emits and stores, not what the model says.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.clients import openai_client
from tests.support.mcp import McpTestServer, start_mcp_server
from tests.support.schema import validate_event
from tests.support.server import Server, free_port, start_server
from tests.support.sse import read_events, stream_events

TIMEOUT_S = 8  # --mcp-timeout of the server under test; the slow tool takes 30 s
FORCED: dict[str, Any] = {
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "max_tool_calls": 1,
    "max_output_tokens": 64,
    "temperature": 0,
}


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpTestServer]:
    server = start_mcp_server(Path(tmp_path_factory.mktemp("mcp")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def respond(tmp_path_factory: pytest.TempPathFactory, mcp: McpTestServer) -> Iterator[Server]:
    """respond with a config declaring the token-protected server as `vault`."""
    tmp = Path(tmp_path_factory.mktemp("respond-mcp"))
    config = tmp / "respond.toml"
    config.write_text(
        f"""
[mcp]
allow = ["*.allowed.invalid"]
timeout = {TIMEOUT_S}

[mcp.servers.vault]
url = "{mcp.secure_url}"
headers = {{ Authorization = "Bearer {mcp.token}" }}
require_approval = "never"
"""
    )
    # The tests' MCP server is on loopback, which requests may name only when allowed.
    server = start_server(tmp, "--threads", "2", "--config", str(config), "--mcp-allow-loopback")
    yield server
    server.stop()


@pytest.fixture
def sdk(respond: Server) -> Iterator[openai.OpenAI]:
    client = openai_client(respond.base_url, timeout=600)
    yield client
    client.close()


def tool(mcp: McpTestServer, **fields: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "tests", "server_url": mcp.url, **fields}


def create(sdk: openai.OpenAI, **body: Any) -> dict[str, Any]:
    body.setdefault("input", "What is the secret word?")
    response = sdk.responses.create(model=BUNDLED_ALIAS, **body)
    dumped: dict[str, Any] = response.model_dump(mode="json", exclude_none=True)
    return dumped


def assert_finished(response: dict[str, Any]) -> None:
    """Ended by the model, or by max_output_tokens spent over all of the loop's turns."""
    if response["status"] == "incomplete":
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
        assert response["usage"]["output_tokens"] <= response["max_output_tokens"]
    else:
        assert response["status"] == "completed", response.get("error")


def kinds(response: dict[str, Any]) -> list[str]:
    return [item["type"] for item in response["output"]]


def listed_again(mcp: McpTestServer, since: int) -> bool:
    """Whether anything listed the tools since `since`: respond itself, or the mcp client
    inside a call (it lists to validate results unless told the tools it has)."""
    return bool(calls_to(mcp, "tools/list", since))


def calls_to(mcp: McpTestServer, method: str, since: int = 0) -> list[dict[str, Any]]:
    """The requests of `method` (tools/list, tools/call) that reached the MCP server."""
    return [r for r in mcp.requests()[since:] if r["headers"].get("mcp-method") == method]


# ---------------------------------------------------------------- the loop


def test_a_call_with_never_runs_inside_the_response(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    mark = len(mcp.requests())
    response = create(
        sdk, tools=[tool(mcp, require_approval="never", allowed_tools=["get_nonce"])], **FORCED
    )
    assert_finished(response)
    assert kinds(response)[:2] == ["mcp_list_tools", "mcp_call"]
    assert kinds(response)[-1] == "message"
    listing, call = response["output"][:2]
    assert listing["server_label"] == "tests"
    assert [t["name"] for t in listing["tools"]] == ["get_nonce"]
    assert listing["tools"][0]["annotations"] == {"readOnlyHint": True}
    assert (call["name"], call["server_label"], call["status"]) == (
        "get_nonce",
        "tests",
        "completed",
    )
    assert call["output"] == mcp.nonce
    assert "error" not in call
    assert [r["headers"]["mcp-name"] for r in calls_to(mcp, "tools/call", mark)] == ["get_nonce"]
    assert len(calls_to(mcp, "tools/list", mark)) == 1  # the listing; the call lists nothing
    stored = sdk.responses.retrieve(response["id"]).model_dump(mode="json", exclude_none=True)
    assert stored["output"] == response["output"]


def test_streamed_events_interleave_with_the_text(respond: Server, mcp: McpTestServer) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "input": "What is the secret word?",
        "tools": [tool(mcp, require_approval="never", allowed_tools=["get_nonce"])],
        "stream": True,
        **FORCED,
    }
    events = stream_events(f"{respond.base_url}/responses", body, 600)
    for event in events:
        validate_event(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    call_index = next(
        e["output_index"] for e in events if e["type"] == "response.mcp_call.in_progress"
    )
    of_call = [
        e["type"]
        for e in events
        if e.get("output_index") == call_index and not e["type"].startswith("response.output_text")
    ]
    assert of_call[0] == "response.output_item.added"
    assert of_call[1] == "response.mcp_call.in_progress"
    assert set(of_call[2:-3]) <= {"response.mcp_call_arguments.delta"}
    assert of_call[-3:] == [
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert types.index("response.mcp_list_tools.completed") < types.index(
        "response.mcp_call.in_progress"
    )
    # The text of the next engine turn comes after the call is done, in the same response.
    assert types.index("response.mcp_call.completed") < types.index("response.output_text.delta")
    assert types[-1] in ("response.completed", "response.incomplete")
    final = events[-1]["response"]
    stored = httpx.get(f"{respond.base_url}/responses/{final['id']}", timeout=30).json()
    assert stored["output"] == final["output"]
    assert stored["output"][call_index]["output"] == mcp.nonce


def test_approval_round_trip_approve(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    tools = [tool(mcp, allowed_tools=["get_nonce"])]  # require_approval defaults to "always"
    mark = len(mcp.requests())
    first = create(sdk, tools=tools, **FORCED)
    assert first["status"] == "completed"
    assert kinds(first) == ["mcp_list_tools", "mcp_approval_request"]
    request = first["output"][1]
    assert (request["name"], request["server_label"]) == ("get_nonce", "tests")
    assert calls_to(mcp, "tools/call", mark) == []  # nothing ran before the approval
    mark = len(mcp.requests())
    second = create(
        sdk,
        previous_response_id=first["id"],
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        ],
        tools=tools,
        tool_choice="none",
        max_output_tokens=32,
        temperature=0,
    )
    assert_finished(second)
    assert kinds(second) == ["mcp_call", "message"]  # the chain's listing is reused
    call = second["output"][0]
    assert call["approval_request_id"] == request["id"]
    assert call["output"] == mcp.nonce
    assert not listed_again(mcp, mark)
    assert len(calls_to(mcp, "tools/call", mark)) == 1
    items = sdk.responses.input_items.list(second["id"]).model_dump(mode="json")["data"]
    assert [item["type"] for item in items] == ["mcp_approval_response"]


def test_approval_round_trip_refuse(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    tools = [tool(mcp, allowed_tools=["get_nonce"])]
    first = create(sdk, tools=tools, **FORCED)
    request = first["output"][-1]
    assert request["type"] == "mcp_approval_request"
    mark = len(mcp.requests())
    second = create(
        sdk,
        previous_response_id=first["id"],
        input=[
            {
                "type": "mcp_approval_response",
                "approval_request_id": request["id"],
                "approve": False,
                "reason": "not now",
            }
        ],
        tools=tools,
        tool_choice="none",
        max_output_tokens=32,
        temperature=0,
    )
    assert_finished(second)
    assert kinds(second) == ["message"]
    assert calls_to(mcp, "tools/call", mark) == []


def test_an_unknown_approval_request_is_a_400(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        create(
            sdk,
            input=[
                {"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}
            ],
            tools=[tool(mcp)],
        )
    assert caught.value.body["param"] == "input[0].approval_request_id"  # type: ignore[index]


def test_allowed_tools_and_a_forced_named_call(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    response = create(
        sdk,
        input="Add two numbers.",
        tools=[
            tool(mcp, require_approval="never", allowed_tools={"tool_names": ["add", "get_nonce"]})
        ],
        **{**FORCED, "tool_choice": {"type": "mcp", "server_label": "tests", "name": "add"}},
    )
    listing, call = response["output"][:2]
    assert sorted(t["name"] for t in listing["tools"]) == ["add", "get_nonce"]
    assert call["type"] == "mcp_call" and call["name"] == "add"
    arguments = json.loads(call["arguments"])
    assert call["output"] == str(arguments["a"] + arguments["b"])
    assert response["tool_choice"] == {"type": "mcp", "server_label": "tests", "name": "add"}


def test_read_only_filter_lists_only_read_only_tools(
    sdk: openai.OpenAI, mcp: McpTestServer
) -> None:
    response = create(
        sdk,
        tools=[tool(mcp, allowed_tools={"read_only": True})],
        tool_choice="none",
        max_output_tokens=4,
    )
    assert [t["name"] for t in response["output"][0]["tools"]] == ["get_nonce"]


def test_a_raising_tool_is_an_error_item_and_the_loop_goes_on(
    sdk: openai.OpenAI, mcp: McpTestServer
) -> None:
    response = create(
        sdk,
        tools=[tool(mcp, require_approval="never")],
        **{**FORCED, "tool_choice": {"type": "mcp", "server_label": "tests", "name": "explode"}},
    )
    assert_finished(response)
    call = response["output"][1]
    assert call["status"] == "failed"
    assert call["error"]["type"] == "mcp_tool_execution_error"
    assert mcp.nonce in json.dumps(call["error"]["content"])
    assert kinds(response)[-1] == "message"


def test_a_call_past_the_timeout_is_an_error(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    started = time.monotonic()
    response = create(
        sdk,
        tools=[tool(mcp, require_approval="never")],
        **{**FORCED, "tool_choice": {"type": "mcp", "server_label": "tests", "name": "slow"}},
    )
    call = response["output"][1]
    assert call["status"] == "failed"
    assert call["error"]["type"] == "mcp_protocol_error"
    assert f"timed out after {TIMEOUT_S}s" in call["error"]["message"]
    assert time.monotonic() - started < 30  # the tool's own 30 s were not waited for


# ---------------------------------------------------------------- chains


def test_a_chained_turn_does_not_list_again(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    tools = [tool(mcp, require_approval="never", allowed_tools=["get_nonce"])]
    first = create(sdk, tools=tools, tool_choice="none", max_output_tokens=8)
    assert kinds(first)[0] == "mcp_list_tools"
    mark = len(mcp.requests())
    second = create(sdk, previous_response_id=first["id"], input="Again.", tools=tools, **FORCED)
    assert "mcp_list_tools" not in kinds(second)
    assert not listed_again(mcp, mark)
    assert second["output"][0]["type"] == "mcp_call"
    assert second["output"][0]["output"] == mcp.nonce


def test_a_conversation_keeps_the_mcp_items(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    conversation = sdk.conversations.create()
    tools = [tool(mcp, require_approval="never", allowed_tools=["get_nonce"])]
    first = create(sdk, conversation=conversation.id, tools=tools, **FORCED)
    items = sdk.conversations.items.list(conversation.id, order="asc").model_dump(mode="json")
    kept = [item["type"] for item in items["data"]]
    assert kept[:3] == ["message", "mcp_list_tools", "mcp_call"]
    assert items["data"][2]["output"] == mcp.nonce
    mark = len(mcp.requests())
    second = create(sdk, conversation=conversation.id, input="Again.", tools=tools, **FORCED)
    assert "mcp_list_tools" not in kinds(second)  # the conversation's listing is reused
    assert not listed_again(mcp, mark)
    assert first["conversation"] == second["conversation"] == {"id": conversation.id}


# ---------------------------------------------------------------- servers, secrets, egress


def test_an_unreachable_server_is_a_424_naming_it(sdk: openai.OpenAI) -> None:
    down = {"type": "mcp", "server_label": "down", "server_url": "http://127.0.0.1:9/mcp"}
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as caught:
            create(sdk, tools=[down], stream=stream)
        assert caught.value.status_code == 424
        assert "'down'" in caught.value.message


SECRET = "internal-service-secret-7f3a"


class _Answers(http.server.BaseHTTPRequestHandler):
    """An internal HTTP service that is not MCP: whatever it is asked, a body with a secret."""

    def _answer(self) -> None:
        status = 500 if self.path.startswith("/500") else 200
        body = json.dumps({"secret": SECRET, "jsonrpc": SECRET}).encode()
        self.send_response(status, f"Reason {SECRET}")
        self.send_header("Content-Type", "application/json" if status == 200 else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, str]]:
    """Loopback ports of every kind: closed, open but not HTTP, HTTP but not MCP."""
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    raw = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def banner() -> None:  # an SSH-like service: says something, then hangs up
        raw.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = raw.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(f"SSH-2.0-{SECRET}\r\n".encode())

    threads = [threading.Thread(target=web.serve_forever), threading.Thread(target=banner)]
    for thread in threads:
        thread.start()
    web_port, raw_port = web.server_address[1], raw.getsockname()[1]
    yield {
        "closed": f"http://127.0.0.1:{free_port()}/mcp",
        "not_http": f"http://127.0.0.1:{raw_port}/mcp",
        "http_200": f"http://127.0.0.1:{web_port}/mcp",
        "http_500": f"http://127.0.0.1:{web_port}/500/mcp",
    }
    stop.set()
    web.shutdown()
    for thread in threads:
        thread.join()
    web.server_close()
    raw.close()


def test_an_unlistable_server_says_only_that_it_could_not_be_reached(
    respond: Server, sdk: openai.OpenAI, services: dict[str, str]
) -> None:
    """#32: the 424 told closed, open and HTTP ports apart and echoed the service's body.
    Now every kind of port reads the same, and nothing the far end sent is repeated."""
    messages = {}
    for kind, url in services.items():
        probe = {"type": "mcp", "server_label": "probe", "server_url": url}
        with pytest.raises(openai.APIStatusError) as caught:
            create(sdk, tools=[probe])
        assert caught.value.status_code == 424, kind
        messages[kind] = caught.value.message
        assert SECRET not in json.dumps(caught.value.body), kind
    assert len(set(messages.values())) == 1, messages
    assert "could not reach the MCP server" in messages["closed"]
    assert SECRET not in respond.log()


def test_egress_refuses_urls_off_the_allow_list(sdk: openai.OpenAI) -> None:
    far = {"type": "mcp", "server_label": "far", "server_url": "https://mcp.example.com/mcp"}
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, tools=[far])
    assert caught.value.body["param"] == "tools[0].server_url"  # type: ignore[index]
    assert "--mcp-allow" in caught.value.message
    # Admitted by the config's allow pattern: respond tries it (.invalid never resolves).
    allowed = {**far, "server_url": "http://mcp.allowed.invalid/mcp"}
    with pytest.raises(openai.APIStatusError) as caught_424:
        create(sdk, tools=[allowed])
    assert caught_424.value.status_code == 424


def test_a_configured_server_by_label_or_connector(sdk: openai.OpenAI, mcp: McpTestServer) -> None:
    for vault in (
        {"type": "mcp", "server_label": "vault"},
        {"type": "mcp", "server_label": "safe", "connector_id": "vault"},
    ):
        response = create(sdk, tools=[vault], **FORCED)
        call = response["output"][1]
        assert call["type"] == "mcp_call" and call["output"] == mcp.nonce
        assert response["tools"][0].get("headers") is None
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, tools=[{"type": "mcp", "server_label": "x", "connector_id": "nope"}])
    assert caught.value.body["param"] == "tools[0].connector_id"  # type: ignore[index]
    assert "vault" in caught.value.message


def test_authorization_goes_to_its_server_only_and_is_never_kept(
    respond: Server, sdk: openai.OpenAI, mcp: McpTestServer
) -> None:
    secure = {
        "type": "mcp",
        "server_label": "secure",
        "server_url": mcp.secure_url,
        "authorization": mcp.token,
        "headers": {"X-Extra": f"extra-{mcp.token}"},
        "require_approval": "never",
        "allowed_tools": ["get_nonce"],
    }
    other = tool(mcp, require_approval="never", allowed_tools=["add"])
    mark = len(mcp.requests())
    response = create(
        sdk,
        tools=[secure, other],
        **{**FORCED, "tool_choice": {"type": "mcp", "server_label": "secure"}},
    )
    assert response["output"][2]["output"] == mcp.nonce
    seen = mcp.requests()[mark:]
    to_secure = [r for r in seen if r["path"] == "/secure/mcp"]
    to_other = [r for r in seen if r["path"] == "/mcp"]
    assert to_secure and to_other
    assert all(r["headers"]["authorization"] == f"Bearer {mcp.token}" for r in to_secure)
    assert all(mcp.token not in json.dumps(r["headers"]) for r in to_other)
    replay = httpx.get(
        f"{respond.base_url}/responses/{response['id']}", params={"stream": "true"}, timeout=30
    ).text
    kept = [
        json.dumps(sdk.responses.retrieve(response["id"]).model_dump(mode="json")),
        json.dumps(sdk.responses.input_items.list(response["id"]).model_dump(mode="json")),
        replay,
        json.dumps(response),
        respond.log(),
    ]
    assert all(mcp.token not in text for text in kept)
    without = {key: value for key, value in secure.items() if key != "authorization"}
    with pytest.raises(openai.APIStatusError) as caught:
        create(sdk, tools=[without])
    assert caught.value.status_code == 424 and "'secure'" in caught.value.message


@pytest.mark.parametrize("path", ["/sse", "/events"])
def test_the_sse_transport(tmp_path: Path, sdk: openai.OpenAI, path: str) -> None:
    """A server that speaks only the older HTTP+SSE transport. At a URL that does not say
    so (/events), respond tries Streamable HTTP first, is refused, and opens the SSE stream
    with GET, as the MCP specification's backwards-compatibility rule says."""
    sse = start_mcp_server(tmp_path, transport="sse", sse_path=path)
    try:
        response = create(
            sdk,
            tools=[
                {
                    "type": "mcp",
                    "server_label": "old",
                    "server_url": f"{sse.server.url}{path}",
                    "require_approval": "never",
                    "allowed_tools": ["get_nonce"],
                }
            ],
            **FORCED,
        )
    finally:
        sse.stop()
    assert kinds(response)[:2] == ["mcp_list_tools", "mcp_call"]
    assert response["output"][1]["output"] == sse.nonce
    asked = [r["method"] for r in sse.requests() if r["path"] == path]
    # One SSE stream per session (the listing, the call); at /events each one opened after
    # Streamable HTTP's POSTs were refused (how many the mcp client tries is its own choice).
    assert asked.count("GET") == 2, asked
    assert asked[0] == ("GET" if path == "/sse" else "POST"), asked
    assert set(asked) == ({"GET"} if path == "/sse" else {"GET", "POST"}), asked


# ---------------------------------------------------------------- cancel


def wait_for(predicate: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_cancel_stops_a_running_call(respond: Server, mcp: McpTestServer) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "input": "Go.",
        "background": True,
        "tools": [tool(mcp, require_approval="never")],
        **FORCED,
        "tool_choice": {"type": "mcp", "server_label": "tests", "name": "slow"},
    }
    started = len(mcp.notes())
    queued = httpx.post(f"{respond.base_url}/responses", json=body, timeout=60).json()
    url = f"{respond.base_url}/responses/{queued['id']}"
    wait_for(lambda: {"slow": "started"} in mcp.notes()[started:])
    cancelled = httpx.post(f"{url}/cancel", timeout=60).json()
    assert cancelled["status"] == "cancelled"
    stored = httpx.get(url, timeout=30).json()
    call = next(item for item in stored["output"] if item["type"] == "mcp_call")
    assert call["status"] == "incomplete" and call.get("output") is None
    # The MCP server saw the call end early (its client went away), not finish.
    wait_for(lambda: {"slow": "cancelled"} in mcp.notes()[started:], timeout=TIMEOUT_S)
    assert {"slow": "finished"} not in mcp.notes()[started:]


def test_a_disconnect_stops_a_running_call(respond: Server, mcp: McpTestServer) -> None:
    body = {
        "model": BUNDLED_ALIAS,
        "input": "Go.",
        "stream": True,
        "tools": [tool(mcp, require_approval="never")],
        **FORCED,
        "tool_choice": {"type": "mcp", "server_label": "tests", "name": "slow"},
    }
    started = len(mcp.notes())
    response_id = None
    with httpx.stream("POST", f"{respond.base_url}/responses", json=body, timeout=600) as reply:
        # Held, not dropped: a dropped reader is collected and closes the connection early.
        events = read_events(reply)
        for event in events:
            response_id = response_id or event.get("response", {}).get("id")
            if event["type"] == "response.mcp_call_arguments.done":
                break
        # The call runs once the engine turn has ended: hang up only while it runs.
        wait_for(lambda: {"slow": "started"} in mcp.notes()[started:])
        events.close()
    wait_for(lambda: {"slow": "cancelled"} in mcp.notes()[started:], timeout=TIMEOUT_S)
    stored = wait_for(
        lambda: (
            r
            if (r := httpx.get(f"{respond.base_url}/responses/{response_id}", timeout=30).json())[
                "status"
            ]
            == "cancelled"
            else None
        )
    )
    call = next(item for item in stored["output"] if item["type"] == "mcp_call")
    assert call["status"] == "incomplete"


def test_tool_choice_naming_an_absent_mcp_server_is_a_400(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, tool_choice={"type": "mcp", "server_label": "nowhere"})
    assert caught.value.body["param"] == "tool_choice"  # type: ignore[index]
    assert "'nowhere'" in caught.value.message


# ---------------------------------------------------------------- deferred servers

DEFERRED = {"require_approval": "never", "defer_loading": True, "allowed_tools": ["get_nonce"]}


def test_a_deferred_server_is_loaded_by_a_search_then_called(
    sdk: openai.OpenAI, mcp: McpTestServer
) -> None:
    """defer_loading on an mcp tool: listed, but its tools reach the model only once a
    search loads them; the loaded tool stays loaded along the chain."""
    served = tool(mcp, server_description="The secret word of the tests.", **DEFERRED)
    tools = [{"type": "tool_search"}, served]
    first = create(
        sdk,
        input="Search for the secret word tool.",
        tools=tools,
        tool_choice="required",
        max_output_tokens=96,
        temperature=0,
    )
    assert kinds(first)[:3] == ["mcp_list_tools", "tool_search_call", "tool_search_output"]
    search, found = first["output"][1:3]
    assert isinstance(search["arguments"]["query"], str) and search["arguments"]["query"]
    # Listed as the request's tool narrowed to what was loaded, without its credentials.
    (loaded,) = found["tools"]
    assert loaded["type"] == "mcp" and loaded["server_label"] == "tests"
    assert loaded["allowed_tools"] == ["get_nonce"] and "defer_loading" not in loaded
    mark = len(mcp.requests())
    choice = {"type": "mcp", "server_label": "tests", "name": "get_nonce"}
    chained = create(
        sdk,
        previous_response_id=first["id"],
        input="Now call it.",
        tools=tools,
        tool_choice=choice,
        max_output_tokens=32,
    )
    assert "mcp_call" in kinds(chained), kinds(chained)
    call = chained["output"][kinds(chained).index("mcp_call")]
    assert call["name"] == "get_nonce" and call["output"] == mcp.nonce
    assert [r["headers"]["mcp-name"] for r in calls_to(mcp, "tools/call", mark)] == ["get_nonce"]


def test_a_deferred_server_needs_a_search_before_it_is_named(
    sdk: openai.OpenAI, mcp: McpTestServer
) -> None:
    served = tool(mcp, **DEFERRED)
    choice = {"type": "mcp", "server_label": "tests", "name": "get_nonce"}
    with pytest.raises(openai.BadRequestError) as named:
        create(sdk, tools=[{"type": "tool_search"}, served], tool_choice=choice)
    assert named.value.body["param"] == "tool_choice"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as alone:
        create(sdk, tools=[served])
    assert alone.value.body["param"] == "tools[0].defer_loading"  # type: ignore[index]
