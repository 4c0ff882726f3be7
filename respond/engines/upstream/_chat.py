"""An engine in front of a Chat Completions server (vLLM, SGLang, llama-server, Ollama, ...).

It only translates: a ChatTurn becomes one streaming POST /chat/completions (usage always
requested), and the chunks that come back become Deltas. Items, events, state and
errors-as-events stay with the Run and the EventBuilder, exactly as for the embedded engine.

What the upstream may not enforce is enforced here: only the allowed tools are sent, calls
to tools the model was not offered (or any call under tool_choice "none") are dropped, and
with parallel_tool_calls false only the first call is kept (the first max_tool_calls with
that limit). A forced call is asked for through structured output (_forced.py), strict
tools' arguments are checked against their schema, and usage the upstream did not send is
counted through its tokenizer (_usage.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from respond._ids import new_id
from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    Delta,
    Engine,
    EngineError,
    Finish,
    FunctionSpec,
    LoadReport,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.engines._calls import RepeatGuard
from respond.engines._tools import visible_tools
from respond.engines.formats import HERMES, THINK_TAGS
from respond.engines.upstream._common import (
    CallAdmission,
    StrictArguments,
    affinity_keys,
    json_schema_format,
    sampling_body,
    token_logprobs,
)
from respond.engines.upstream._forced import (
    call_grammar,
    call_messages,
    call_schema,
    forced_tools,
    parse_call,
)
from respond.engines.upstream._pool import UpstreamHTTPError, UpstreamPool, upstream_error
from respond.engines.upstream._usage import Tokenizer
from respond.engines.upstream._window import discover

__all__ = ["ChatCompletionsEngine", "ChatOptions", "ChatTranslator", "chat_request"]

log = logging.getLogger("respond.upstream")

SchemaStyle = Literal["json_schema", "json_object_schema"]


@dataclass(frozen=True)
class ChatOptions:
    """How to speak to one Chat Completions upstream.

    max_tokens_param: the field that carries max_output_tokens. "max_tokens" is read by
    every open server (vLLM, SGLang, llama-server, Ollama, llama-cpp-python);
    OpenAI's reasoning models need "max_completion_tokens".
    send_reasoning: carry earlier reasoning as `reasoning_content` on assistant messages.

    forced_calls: "structured" asks for a forced call (tool_choice "required" or a named
    function) through response_format json_schema, which every open server enforces;
    "native" passes tool_choice on, for upstreams known to honour it.

    grammars: "gbnf" sends a forced call to a custom tool with a grammar as a llama.cpp
    grammar (`grammar`, which llama-server and llama-cpp-python's server take), so its input
    is decoded in the language; "check" only checks the input afterwards; "auto" is "gbnf"
    where the upstream is llama-server (it answers GET /props), else "check".
    """

    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_reasoning: bool = True
    forced_calls: Literal["structured", "native"] = "structured"
    grammars: Literal["auto", "gbnf", "check"] = "auto"
    context_window: int | None = None  # None: asked of the upstream at start (_window.py)


# ---------------------------------------------------------------- request


def chat_request(
    turn: ChatTurn,
    *,
    model: str,
    options: ChatOptions = ChatOptions(),
    schema_style: SchemaStyle = "json_schema",
) -> dict[str, Any]:
    """The Chat Completions body for a turn (always streaming, usage included)."""
    forced = forced_calls(turn, options)
    messages = call_messages(turn.messages, forced) if forced else turn.messages
    body: dict[str, Any] = {
        "model": model,
        "messages": [_message(m, options) for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        **sampling_body(turn.sampling, "chat"),
    }
    if turn.max_output_tokens is not None:
        body[options.max_tokens_param] = turn.max_output_tokens
    if turn.reasoning_effort is not None:
        body["reasoning_effort"] = turn.reasoning_effort
    if forced:  # the tools are in the system message; the call comes back as JSON
        if options.grammars == "gbnf" and any(tool.grammar for tool in forced):
            body["grammar"] = call_grammar(forced)
            return body
        schema: dict[str, Any] = {"name": "function_call", "schema": call_schema(forced)}
        body["response_format"] = _schema_format(schema, schema_style)
        return body
    body.update(_tools(turn))
    fmt = _response_format(turn, schema_style)
    if fmt is not None:
        body["response_format"] = fmt
    return body


def forced_calls(turn: ChatTurn, options: ChatOptions) -> list[FunctionSpec]:
    """The tools of a forced call asked for through structured output; empty otherwise."""
    return forced_tools(turn) if options.forced_calls == "structured" else []


def _message(message: ChatMessage, options: ChatOptions) -> dict[str, Any]:
    # Most open models' templates know "system" but not "developer"; they mean the same.
    role = "system" if message.role == "developer" else message.role
    entry: dict[str, Any] = {"role": role}
    if message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in message.images]
        entry["content"] = parts
    elif message.tool_calls and not message.content:
        # "" rather than null: llama-cpp-python's server refuses a null content.
        entry["content"] = ""
    else:
        entry["content"] = message.content
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        entry["tool_call_id"] = message.tool_call_id
    if message.reasoning and options.send_reasoning and role == "assistant":
        entry["reasoning_content"] = message.reasoning
    return entry


def _tools(turn: ChatTurn) -> dict[str, Any]:
    offered = visible_tools(turn)
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": dict(tool.parameters),
                # Responses defaults strict to true, Chat Completions to false: say it.
                "strict": tool.strict,
            },
        }
        for tool in offered
    ]
    if not tools:
        return {}
    choice = turn.tool_choice
    tool_choice: Any = choice.mode
    if choice.mode == "required" and len(offered) == 1:
        tool_choice = {"type": "function", "function": {"name": offered[0].name}}
    return {
        "tools": tools,
        "tool_choice": tool_choice,
        "parallel_tool_calls": turn.parallel_tool_calls,
    }


def _response_format(turn: ChatTurn, style: SchemaStyle) -> dict[str, Any] | None:
    spec = json_schema_format(turn)
    if spec is not None:
        return _schema_format(spec, style)
    if turn.json_object:
        return {"type": "json_object"}
    return None


def _schema_format(spec: dict[str, Any], style: SchemaStyle) -> dict[str, Any]:
    if style == "json_object_schema":
        # llama-cpp-python's server: json_object constrained by a schema.
        return {"type": "json_object", "schema": spec["schema"]}
    return {"type": "json_schema", "json_schema": spec}


# ---------------------------------------------------------------- response


@dataclass
class _Call:
    index: int
    call_id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    dropped: bool = False


class ChatTranslator:
    """Chat Completions chunks -> Deltas, keeping items well-formed.

    Tool calls may arrive interleaved by index. The first call streams live; the others
    are buffered whole and emitted after it, each as start, fragments, end. Text or
    reasoning that arrives once a call is open is emitted after the calls.
    """

    def __init__(self, turn: ChatTurn, forced: list[FunctionSpec] | None = None) -> None:
        self._admission = CallAdmission(turn)
        self._strict = StrictArguments(turn)
        # A forced call asked for as JSON: the content is the call, parsed at the end.
        self._forced = forced or []
        self._forced_text: list[str] = []
        self.output_text: list[str] = []  # everything the model wrote, to count if need be
        self.chunks = 0  # chunks received so far
        self._calls: dict[int, _Call] = {}
        self._live: _Call | None = None
        self._trailing: list[Delta] = []
        # Servers without a reasoning parser leave <think> spans in the content: the
        # shared output parser splits them out (tool calls come as fields, not markup).
        self._think = HERMES.parser(
            tools=None,  # no call markers: only the reasoning split
            think=THINK_TAGS,
            in_reasoning=False,
            new_call_id=lambda: new_id("call"),
            stop_at_call=False,
        )
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[Delta]:
        self.chunks += 1
        out: list[Delta] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.output_text.append(reasoning)
                out += self._after_calls(ReasoningDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.output_text.append(content)
                if self._forced:
                    self._forced_text.append(content)
                else:
                    out += self._content(content, choice.get("logprobs"))
            for call in delta.get("tool_calls") or ():
                out += self._tool_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def end(self) -> list[Delta]:
        """What remains once the upstream has finished: calls, trailing text, usage, finish."""
        out: list[Delta] = []
        for delta in self._think.close():
            out += self._after_calls(delta)
        if self._forced:
            text, cut = "".join(self._forced_text), self.finish_reason == "length"
            out += self._strict.checked(parse_call(text, self._forced, truncated=cut))
        calls = sorted(self._calls.values(), key=lambda c: c.index)
        for call in calls:
            if call is self._live or (not call.dropped and self._keep(call)):
                self._strict.check(call.name, "".join(call.fragments))
        if self._live is not None:
            out.append(ToolCallEnd())
        for call in calls:
            if call is self._live or call.dropped:
                continue
            out.append(ToolCallStart(call_id=call.call_id or new_id("call"), name=call.name))
            out += [ToolCallArgumentsDelta(fragment) for fragment in call.fragments]
            out.append(ToolCallEnd())
        if self.finish_reason == "length" and out and isinstance(out[-1], ToolCallEnd):
            out[-1] = ToolCallEnd(at_end=True)  # the last call was cut by the token limit
        out += self._trailing
        if self.usage is not None:
            out.append(self.usage)
        out.append(Finish("length" if self.finish_reason == "length" else "stop"))
        return out

    def _content(self, content: str, logprobs: Any) -> list[Delta]:
        out: list[Delta] = []
        tokens = token_logprobs(logprobs)
        for delta in self._think.feed(content):
            if isinstance(delta, TextDelta) and tokens:
                delta, tokens = TextDelta(delta.text, tokens), ()
            out += self._after_calls(delta)
        return out

    def _after_calls(self, delta: Delta) -> list[Delta]:
        if self._calls:
            self._trailing.append(delta)
            return []
        return [delta]

    def _tool_call(self, data: Mapping[str, Any]) -> list[Delta]:
        index = int(data.get("index", len(self._calls)))
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _Call(index)
        if data.get("id"):
            call.call_id = str(data["id"])
        function = data.get("function") or {}
        if function.get("name"):
            call.name += str(function["name"])
        fragment = function.get("arguments")
        if isinstance(fragment, dict):  # some servers send parsed arguments
            fragment = json.dumps(fragment)
        if fragment:
            call.fragments.append(str(fragment))
            self.output_text.append(str(fragment))
        if call is self._live:
            return [ToolCallArgumentsDelta(str(fragment))] if fragment else []
        if self._live is None and len(self._calls) == 1 and call.name and self._keep(call):
            self._live = call
            return [
                ToolCallStart(call_id=call.call_id or new_id("call"), name=call.name),
                *(ToolCallArgumentsDelta(f) for f in call.fragments),
            ]
        return []

    def _keep(self, call: _Call) -> bool:
        """Decide once per call whether local tool_choice rules let it through."""
        if call.dropped:
            return False
        call.dropped = not self._admission.admit(call.name)
        return not call.dropped


def _usage(data: Mapping[str, Any]) -> Usage:
    prompt = data.get("prompt_tokens_details") or {}
    completion = data.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cached_tokens=int(prompt.get("cached_tokens") or 0),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0),
    )


# ---------------------------------------------------------------- the engine

_GRAMMARS = {
    "gbnf": "sent to the upstream (llama-server) for forced calls, checked after",
    "check": 'checked after the call (set grammars = "gbnf" for llama-cpp-python\'s server)',
}


class ChatCompletionsEngine(Engine):
    def __init__(
        self,
        pool: UpstreamPool,
        *,
        alias: str,
        upstream_model: str,
        options: ChatOptions = ChatOptions(),
        vision: bool = True,
    ) -> None:
        self.pool = pool
        self.upstream_model = upstream_model
        self.options = options
        self.info = pool.model_info(alias, backend="chat-completions", vision=vision)
        # Learned from the upstream's first refusal of response_format json_schema.
        self._schema_style: SchemaStyle = "json_schema"
        self._tokenizer = Tokenizer(pool, upstream_model)
        self._loaded = False

    @property
    def ready(self) -> bool:
        return self._loaded

    def load(self) -> None:
        """Learn the upstream's context window (so that truncation "auto" can count) and
        whether it reads images (so that respond refuses them itself when it does not)."""
        facts = discover(self.pool.members[0].base_url, self.upstream_model, self.pool.api_key)
        window = self.options.context_window or facts.context_window
        if window is not None:
            log.info("%s: context window of %d tokens", self.info.id, window)
            self.info = replace(self.info, context_window=window)
        if facts.vision is False and self.info.vision:
            log.info("%s: the upstream reads no images; input_image is refused", self.info.id)
            self.info = replace(self.info, vision=False)
        if self.options.grammars == "auto":
            grammars: Literal["gbnf", "check"] = "gbnf" if facts.llama_server else "check"
            log.info("%s: custom tools' grammars: %s", self.info.id, _GRAMMARS[grammars])
            self.options = replace(self.options, grammars=grammars)
        self._loaded = True

    async def health(self) -> list[dict[str, Any]]:
        return await self.pool.health()

    def load_report(self) -> LoadReport:
        return self.pool.load_report()

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def count_tokens(self, turn: ChatTurn) -> int:
        """Counted by the upstream, which has the tokenizer: its rendered prompt through its
        tokenizer where it renders one for us, else a one-token completion's usage."""
        body = chat_request(
            turn, model=self.upstream_model, options=self.options, schema_style=self._schema_style
        )
        body.update({"stream": False, self.options.max_tokens_param: 1})
        del body["stream_options"]
        counted = await self._tokenizer.count_prompt(body, turn.cancel)
        if counted is not None:
            return counted
        try:
            async with self.pool.stream(
                "/chat/completions", body, affinity=affinity_keys(turn), cancel=turn.cancel
            ) as upstream:
                data = await upstream.read_json()
        except UpstreamHTTPError as exc:
            if exc.prompt_tokens is None:
                raise
            return exc.prompt_tokens  # too long to run, but the refusal says how long
        usage = data.get("usage") or {}
        if not isinstance(usage, dict) or "prompt_tokens" not in usage:
            raise EngineError(
                "The upstream reports no usage, so its input tokens cannot be counted.",
                code="unsupported",
                status=501,
            )
        return int(usage["prompt_tokens"])

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        forced = forced_calls(turn, self.options)
        translator = ChatTranslator(turn, forced)
        try:
            async for delta in self._attempt(turn, translator):
                yield delta
        except UpstreamHTTPError as exc:
            if not self._schema_refused(turn, exc):
                raise
            log.info("upstream refused response_format json_schema; using json_object+schema")
            self._schema_style = "json_object_schema"
            async for delta in self._attempt(turn, ChatTranslator(turn, forced)):
                yield delta
        except EngineError as exc:
            # llama-cpp-python's server answers 200 and then breaks the stream for a request
            # it refuses (a prompt too long for its context); unstreamed, it says why.
            if translator.chunks or exc.code != "upstream_error" or turn.cancel.is_set():
                raise
            log.info("the upstream's stream broke before its first chunk; asking unstreamed")
            async for delta in self._attempt(turn, ChatTranslator(turn, forced), streamed=False):
                yield delta

    def _schema_refused(self, turn: ChatTurn, exc: UpstreamHTTPError) -> bool:
        asks_schema = turn.json_schema is not None or forced_calls(turn, self.options)
        return (
            bool(asks_schema)
            and self._schema_style == "json_schema"
            and exc.upstream_status in (400, 422, 500)
            and "json_schema" in exc.message
        )

    async def _attempt(
        self, turn: ChatTurn, translator: ChatTranslator, *, streamed: bool = True
    ) -> AsyncGenerator[Delta, None]:
        body = chat_request(
            turn, model=self.upstream_model, options=self.options, schema_style=self._schema_style
        )
        if not streamed:
            body["stream"] = False
            del body["stream_options"]
        guard = RepeatGuard()  # an exact repeat of a call in this turn is dropped
        async with self.pool.stream(
            "/chat/completions", body, affinity=affinity_keys(turn), cancel=turn.cancel
        ) as upstream:
            async for chunk in upstream.json():
                if isinstance(chunk.get("error"), dict | str):
                    raise upstream_error(f"The upstream reported an error: {_message_of(chunk)}")
                for delta in guard.feed(translator.feed(chunk)):
                    yield delta
            if turn.cancel.is_set():
                return
            if translator.finish_reason is None and not upstream.finished:
                raise upstream_error(
                    f"The upstream {upstream.member.base_url} closed the stream before finishing."
                )
        if translator.usage is None:
            translator.usage = await self._counted_usage(turn, translator)
        for delta in guard.feed(translator.end()):
            yield delta

    async def _counted_usage(self, turn: ChatTurn, translator: ChatTranslator) -> Usage | None:
        """Usage the upstream did not send, counted with its tokenizer (see _usage.py)."""
        try:
            prompt = await self.count_tokens(turn)
        except EngineError as exc:
            log.warning("usage: the upstream's prompt tokens cannot be counted: %s", exc.message)
            return None
        output = await self._tokenizer.count("".join(translator.output_text), turn.cancel)
        return None if output is None else Usage(input_tokens=prompt, output_tokens=output)


def _message_of(chunk: Mapping[str, Any]) -> str:
    error = chunk.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
