"""A JSON null where the reference lets a field be null means "absent", on every front door.

The cases are generated from the SDKs' own request types (openai's and anthropic's
TypedDicts, which follow each API's reference): every field typed `Optional[...]`, top
level and one level down in the typed objects a request carries (text, reasoning,
stream_options, a function tool ...), is sent as null on a request that is otherwise
valid, and must be answered 200. LlamaIndex sends `"include": null` on every call.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic.types import message_count_tokens_params, message_create_params
from openai.types.chat import ChatCompletionAssistantMessageParam, completion_create_params
from openai.types.responses import (
    EasyInputMessageParam,
    FunctionToolParam,
    ResponseFunctionToolCallParam,
    input_token_count_params,
    response_compact_params,
    response_create_params,
    response_input_param,
)
from typing_extensions import is_typeddict

from tests.support.server import Server, start_server

Case = tuple[str, dict[str, Any]]


def _unwrap(hint: Any) -> Any:
    """The type under Required/NotRequired/Annotated."""
    while typing.get_origin(hint) in (typing.Annotated, typing.Required, typing.NotRequired):
        hint = typing.get_args(hint)[0]
    return hint


def _members(hint: Any) -> tuple[Any, ...]:
    hint = _unwrap(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(_unwrap(arg) for arg in typing.get_args(hint))
    return (hint,)


def _nullable(hint: Any) -> bool:
    return type(None) in _members(hint)


def _typed_dict(hint: Any) -> Any:
    """The one TypedDict a field holds (besides None), if it holds exactly one."""
    found = [arg for arg in _members(hint) if arg is not type(None)]
    return found[0] if len(found) == 1 and is_typeddict(found[0]) else None


def _fields(typed_dict: Any) -> dict[str, Any]:
    return typing.get_type_hints(typed_dict, include_extras=True)


def _required_filler(typed_dict: Any) -> dict[str, Any] | None:
    """The smallest object of this type: required fields that are nullable get null,
    Literal ones their first value; None when a required field needs a real value."""
    filled: dict[str, Any] = {}
    for name in typed_dict.__required_keys__:
        hint = _fields(typed_dict)[name]
        literal = [a for a in _members(hint) if typing.get_origin(a) is typing.Literal]
        if _nullable(hint):
            filled[name] = None
        elif literal:
            filled[name] = typing.get_args(literal[0])[0]
        else:
            return None
    return filled


def null_cases(typed_dict: Any, base: dict[str, Any], prefix: str = "") -> Iterator[Case]:
    """One case per nullable field: the base body with that field (and only it) null."""
    for name, hint in _fields(typed_dict).items():
        if _nullable(hint):
            yield f"{prefix}{name}", {**base, name: None}
        inner = _typed_dict(hint)
        filler = _required_filler(inner) if inner is not None else None
        if inner is not None and filler is not None and name not in base:
            for case_name, nested in null_cases(inner, filler, f"{prefix}{name}."):
                yield case_name, {**base, name: nested}


MODEL = "smollm2-135m"  # the bundled model
RESPONSE = {"model": MODEL, "input": "Hi", "max_output_tokens": 2}
TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
MESSAGE = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
COUNT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
USER = {"role": "user", "content": "Hi"}
CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "42"}


def _item_cases() -> Iterator[Case]:
    """The items of a tool round trip, each nullable field of each item null in turn."""

    def turn(user: Any = USER, call: Any = CALL, output: Any = OUTPUT) -> dict[str, Any]:
        return {**RESPONSE, "tools": [TOOL], "input": [user, call, output]}

    for name, user in null_cases(EasyInputMessageParam, USER, "input[0]."):
        yield name, turn(user=user)
    for name, call in null_cases(ResponseFunctionToolCallParam, CALL, "input[1]."):
        yield name, turn(call=call)
    for name, output in null_cases(response_input_param.FunctionCallOutput, OUTPUT, "input[2]."):
        # A null call_id is typed so for outputs that answer no call of this request; here
        # it would leave the output answering nothing, which is refused as it should be.
        if name != "input[2].call_id":
            yield name, turn(output=output)


def _cases() -> Iterator[tuple[str, str, dict[str, Any]]]:
    params = response_create_params.ResponseCreateParamsNonStreaming
    for name, body in null_cases(params, RESPONSE):
        yield "/v1/responses", name, body
    for name, tool in null_cases(FunctionToolParam, TOOL, "tools[0]."):
        yield "/v1/responses", name, {**RESPONSE, "tools": [tool]}
    for name, body in _item_cases():
        yield "/v1/responses", name, body
    for name, body in null_cases(response_compact_params.ResponseCompactParams, RESPONSE):
        yield "/v1/responses/compact", name, body
    count = input_token_count_params.InputTokenCountParams
    for name, body in null_cases(count, {"model": MODEL, "input": "Hi"}):
        yield "/v1/responses/input_tokens", name, body
    chat = completion_create_params.CompletionCreateParamsNonStreaming
    for name, body in null_cases(chat, CHAT):
        yield "/v1/chat/completions", name, body
    reply = {"role": "assistant", "content": "Hello"}
    for name, said in null_cases(ChatCompletionAssistantMessageParam, reply, "messages[1]."):
        yield "/v1/chat/completions", name, {**CHAT, "messages": [USER, said, USER]}
    messages = message_create_params.MessageCreateParamsNonStreaming
    for name, body in null_cases(messages, MESSAGE):
        yield "/v1/messages", name, body
    for name, body in null_cases(message_count_tokens_params.MessageCountTokensParams, COUNT):
        yield "/v1/messages/count_tokens", name, body


# Null in the Open Responses schema or sent as null by clients (LlamaIndex, the issue's
# sweep), although this openai release types them without None.
ALSO_NULL: list[tuple[str, str, dict[str, Any]]] = [
    ("/v1/responses", "tools", {**RESPONSE, "tools": None}),
    ("/v1/responses", "tool_choice", {**RESPONSE, "tool_choice": None}),
    ("/v1/responses", "text", {**RESPONSE, "text": None}),
    ("/v1/responses", "text.format", {**RESPONSE, "text": {"format": None}}),
    ("/v1/chat/completions", "tools", {**CHAT, "tools": None}),
    ("/v1/chat/completions", "tool_choice", {**CHAT, "tool_choice": None}),
    ("/v1/chat/completions", "parallel_tool_calls", {**CHAT, "parallel_tool_calls": None}),
    ("/v1/chat/completions", "response_format", {**CHAT, "response_format": None}),
]

CASES = list(_cases()) + ALSO_NULL


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose default output cap (-n) applies where an output cap is sent as null:
    absent, so the bundled model at its default temperature may otherwise write until the
    window is full (a 120 s timeout seen once in CI)."""
    srv = start_server(Path(tmp_path_factory.mktemp("nulls")), "--threads", "2", "-n", "16")
    yield srv
    srv.stop()


def test_the_sweep_covers_the_fields_clients_send_as_null() -> None:
    """The generator finds what the issue found refused (so a change in the SDKs that
    hid them would show here rather than shrink the sweep silently)."""
    swept = {(route, name) for route, name, _ in CASES}
    for name in (
        "include",
        "tools",
        "tool_choice",
        "text",
        "parallel_tool_calls",
        "text.format",
        "reasoning.effort",
        "tools[0].strict",
        "input[2].status",
    ):
        assert ("/v1/responses", name) in swept
    assert ("/v1/chat/completions", "stop") in swept
    assert ("/v1/chat/completions", "messages[1].content") in swept
    assert ("/v1/messages", "metadata.user_id") in swept


@pytest.mark.parametrize(("route", "field", "body"), CASES, ids=[f"{r} {n}" for r, n, _ in CASES])
def test_null_means_absent(server: Server, route: str, field: str, body: dict[str, Any]) -> None:
    reply = httpx.post(f"{server.url}{route}", json=body, timeout=120)
    assert reply.status_code == 200, f"{field}: null refused: {reply.text}"


def test_a_null_on_a_required_field_is_still_refused(server: Server) -> None:
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={**CHAT, "messages": None})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "messages"
