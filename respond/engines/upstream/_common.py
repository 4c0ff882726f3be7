"""What the Chat Completions and Responses translators share: one copy of each rule.

- `CallAdmission`: which of the upstream's tool calls reach the client (tool_choice,
  allowed tools, parallel_tool_calls and max_tool_calls enforced here, since an upstream
  may not enforce them).
- `StrictArguments`: a strict tool's call arguments checked against its schema (and a
  custom tool's input against its grammar).
- `sampling_body`: a turn's sampling as request fields.
- `json_schema_format`: the client's json_schema text format, as the upstream gets it.
- `affinity_keys`: which earlier turns this one follows to the same upstream.
- `token_logprobs`: OpenAI-shaped logprobs back to TokenLogprobs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

import jsonschema

from respond.engines._base import (
    ChatTurn,
    Delta,
    EngineError,
    Sampling,
    TokenLogprob,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines._tools import visible_tools
from respond.engines.grammars import mismatch

__all__ = [
    "CallAdmission",
    "StrictArguments",
    "affinity_keys",
    "json_schema_format",
    "sampling_body",
    "token_logprobs",
]

log = logging.getLogger("respond.upstream")


class CallAdmission:
    """Decides, once per call, whether an upstream's tool call goes through."""

    def __init__(self, turn: ChatTurn) -> None:
        self._offered = {tool.name for tool in visible_tools(turn)}
        self._no_calls = turn.tool_choice.mode == "none"
        self._limit = 1 if not turn.parallel_tool_calls else turn.max_tool_calls
        self._admitted = 0

    def admit(self, name: str) -> bool:
        """True for a call the local rules let through (and count); False to drop it."""
        reason = None
        if self._no_calls:
            reason = 'tool_choice is "none"'
        elif name not in self._offered:
            reason = "the model was not offered this tool"
        elif self._limit is not None and self._admitted >= self._limit:
            reason = "parallel_tool_calls is false or max_tool_calls is reached"
        if reason is not None:
            log.info("dropped a call to %r from the upstream: %s", name, reason)
            return False
        self._admitted += 1
        return True


class StrictArguments:
    """A strict tool's arguments must validate against its schema.

    The embedded engine makes them valid by construction (a grammar); an upstream may
    not, so its calls are checked here, and a call that does not validate fails the
    response with the reason instead of completing with broken arguments.
    """

    def __init__(self, turn: ChatTurn) -> None:
        self._schemas = {tool.name: tool.parameters for tool in turn.tools if tool.strict}
        self._grammars = {tool.name: tool.grammar for tool in turn.tools if tool.grammar}

    def check(self, name: str, arguments: str) -> None:
        schema = self._schemas.get(name)
        if schema is None:
            return
        try:
            value = json.loads(arguments or "{}")
            jsonschema.validate(value, dict(schema))
        except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError) as exc:
            reason = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
            raise EngineError(
                f"The upstream called the strict tool {name!r} with arguments that do not "
                f"match its schema ({reason[:300]}): {arguments[:200]!r}",
                code="invalid_tool_arguments",
                status=502,
            ) from exc
        self.check_input(name, arguments)

    def check_input(self, name: str, arguments: str) -> None:
        """A custom tool's input (arguments {"input": "..."}) must be in its grammar's
        language; other calls pass."""
        grammar = self._grammars.get(name)
        if grammar is None:
            return
        try:
            text = json.loads(arguments).get("input")
        except (ValueError, AttributeError):
            text = None
        if isinstance(text, str):
            why = mismatch(grammar.syntax, grammar.definition, text)
        else:
            why = "it has no input string"
        if why is not None:
            raise EngineError(
                f"The upstream called the custom tool {name!r} with an input that is not in "
                f"its {grammar.syntax} grammar ({why[:300]}): {arguments[:200]!r}",
                code="invalid_tool_arguments",
                status=502,
            )

    def checked(self, deltas: Sequence[Delta]) -> list[Delta]:
        """`deltas` (whole calls), once every call in them is checked."""
        name, fragments = "", [""]
        for delta in deltas:
            if isinstance(delta, ToolCallStart):
                name, fragments = delta.name, [""]
            elif isinstance(delta, ToolCallArgumentsDelta):
                fragments.append(delta.arguments)
            elif isinstance(delta, ToolCallEnd):
                self.check(name, "".join(fragments))
        return list(deltas)


def sampling_body(sampling: Sampling, api: Literal["chat", "responses"]) -> dict[str, Any]:
    """The sampling fields of a request body, in the dialect of `api`.

    Penalties and seed are sent only when set, so servers that reject them still work.
    Responses has no seed, and asks for logprobs through `include`.
    """
    body: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.presence_penalty:
        body["presence_penalty"] = sampling.presence_penalty
    if sampling.frequency_penalty:
        body["frequency_penalty"] = sampling.frequency_penalty
    if api == "chat" and sampling.seed is not None:
        body["seed"] = sampling.seed
    if api == "chat" and sampling.top_k:
        body["top_k"] = sampling.top_k  # llama-server, vLLM and Ollama accept it
    if sampling.logprobs:
        if api == "chat":
            body["logprobs"] = True
        else:
            body["include"] = ["message.output_text.logprobs"]
        body["top_logprobs"] = sampling.top_logprobs
    return body


def json_schema_format(turn: ChatTurn) -> dict[str, Any] | None:
    """name, schema and (when the client set them) description and strict; None without
    a schema. Chat Completions nests it under `json_schema`, Responses inlines it."""
    if turn.json_schema is None:
        return None
    named = turn.schema_format
    spec: dict[str, Any] = {"name": named.name, "schema": dict(turn.json_schema)}
    if named.description:
        spec["description"] = named.description
    if named.strict is not None:
        spec["strict"] = named.strict
    return spec


def affinity_keys(turn: ChatTurn) -> list[str]:
    """Keys whose earlier turns this one should follow to the same upstream.

    A response is remembered under its own id, so the next turn in a
    previous_response_id chain finds the upstream that holds its prefix in cache.
    """
    routing = turn.routing
    return [
        prefix + value
        for prefix, value in (
            ("pck:", routing.prompt_cache_key),
            ("conv:", routing.conversation),
            ("resp:", routing.previous_response_id),
            ("resp:", routing.response_id),
        )
        if value
    ]


def token_logprobs(data: Any) -> tuple[TokenLogprob, ...]:
    """`{"content": [{"token", "logprob", "bytes", "top_logprobs"}, ...]}` as TokenLogprobs."""
    if not isinstance(data, dict):
        return ()
    out = []
    for entry in data.get("content") or ():
        token = str(entry.get("token", ""))
        out.append(
            TokenLogprob(
                token=token,
                logprob=float(entry.get("logprob", 0.0)),
                bytes=tuple(entry.get("bytes") or token.encode()),
                top=tuple(
                    (
                        str(alt.get("token", "")),
                        float(alt.get("logprob", 0.0)),
                        tuple(alt.get("bytes") or str(alt.get("token", "")).encode()),
                    )
                    for alt in entry.get("top_logprobs") or ()
                ),
            )
        )
    return tuple(out)
