"""Forced tool calls through structured output, for upstreams that ignore tool_choice.

llama-server and llama-cpp-python's server take `tool_choice: "required"` (or a named
function) and let the model answer in text anyway. Every open server does enforce
`response_format` json_schema, so when a turn must call a tool the upstream is asked for
one JSON object `{"name": ..., "arguments": {...}}` whose schema allows exactly the
tools that may be called (each name a `const`, its arguments that tool's parameters),
the tools are described in a system message instead of `tools`, and the JSON that comes
back becomes one function call. One call per turn: a forced turn needs at least one.

A custom tool's input must be in its grammar. Upstreams that take a llama.cpp grammar
(llama-server, llama-cpp-python's server: `grammar` on /chat/completions) are sent the
GBNF of the whole call instead of `response_format`, the input decoded under its own
grammar (`call_grammar`); the others are only checked afterwards (_common.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from respond._ids import new_id
from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    Delta,
    EngineError,
    FunctionSpec,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines._tools import visible_tools

__all__ = ["call_grammar", "call_messages", "call_schema", "forced_tools", "parse_call"]


def forced_tools(turn: ChatTurn) -> list[FunctionSpec]:
    """The tools one of which must be called this turn; empty when no call is forced."""
    if turn.tool_choice.mode != "required":
        return []
    return visible_tools(turn)


def call_schema(tools: list[FunctionSpec]) -> dict[str, Any]:
    """The JSON schema of one call to any of `tools`."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.name},
                "arguments": dict(tool.parameters) or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def call_grammar(tools: list[FunctionSpec]) -> str:
    """The GBNF of one call to any of `tools` as `call_schema` writes it, each custom tool's
    input under its own grammar (written inside its JSON string)."""
    # Imported here: the converter is llama-cpp-python's, which respond in front of
    # upstreams loads only when a grammar is asked for.
    from respond.engines.llamacpp._grammar import input_schema, output_grammar

    constrained = [
        replace(tool, parameters=input_schema(tool.parameters, tool.grammar))
        if tool.grammar is not None
        else tool
        for tool in tools
    ]
    return output_grammar(json_output=True, schema=call_schema(constrained))


def call_messages(messages: list[ChatMessage], tools: list[FunctionSpec]) -> list[ChatMessage]:
    """The turn's messages with the tools described up front, where `tools` would have been."""
    listing = "\n".join(
        json.dumps({"name": t.name, "description": t.description or "", "parameters": t.parameters})
        for t in tools
    )
    note = (
        "You must call one of these functions. Answer only with a JSON object "
        '{"name": <function name>, "arguments": <its arguments>}.\n' + listing
    )
    if messages and messages[0].role in ("system", "developer"):
        first = messages[0]
        merged = ChatMessage(role="system", content=f"{first.content}\n\n{note}".strip())
        return [merged, *messages[1:]]
    return [ChatMessage(role="system", content=note), *messages]


def parse_call(text: str, tools: list[FunctionSpec], *, truncated: bool) -> list[Delta]:
    """The call the upstream wrote as JSON; nothing when it ran out of tokens first.

    The upstream enforces the schema, so anything else is its failure, said as such.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        if truncated:  # cut by max_output_tokens: the response ends incomplete, no call
            return []
        raise EngineError(
            f"The upstream did not answer the forced call with JSON: {text[:200]!r}",
            code="upstream_error",
            status=502,
        ) from exc
    names = {tool.name for tool in tools}
    if not isinstance(data, dict) or data.get("name") not in names:
        raise EngineError(
            f"The upstream's forced call names none of the tools {sorted(names)}: {text[:200]!r}",
            code="upstream_error",
            status=502,
        )
    arguments = data.get("arguments")
    return [
        ToolCallStart(call_id=new_id("call"), name=str(data["name"])),
        ToolCallArgumentsDelta(json.dumps(arguments if arguments is not None else {})),
        ToolCallEnd(),
    ]
