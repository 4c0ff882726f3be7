"""The one seam between respond and a model: an engine turns a ChatTurn into Deltas.

An engine knows nothing about HTTP, output items or sequence numbers. It is given a
fully assembled conversation and yields what the model produced, piece by piece::

    class EchoEngine(Engine):
        async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
            text = turn.messages[-1].content
            yield TextDelta(text)
            yield Usage(input_tokens=1, output_tokens=1)
            yield Finish("stop")

Everything else (items, events, storage) is built from those deltas by responses/.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "ChatMessage",
    "ChatTurn",
    "ConstraintError",
    "ContextOverflowError",
    "Delta",
    "Engine",
    "EngineError",
    "Finish",
    "FunctionSpec",
    "InputGrammar",
    "LoadReport",
    "ModelInfo",
    "OverloadedError",
    "PromptCacheLoad",
    "ReasoningDelta",
    "Routing",
    "Sampling",
    "SchemaFormat",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolChoice",
    "UnsupportedSchemaError",
    "UpstreamLoad",
    "Usage",
]


# ---------------------------------------------------------------- what goes in


@dataclass(frozen=True)
class ToolCall:
    """A function call the assistant made earlier in the conversation."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One chat message, as a chat template or a Chat Completions upstream sees it."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # set on role="tool" messages
    reasoning: str | None = None  # assistant reasoning carried from an earlier turn
    images: tuple[str, ...] = ()  # image URLs (data: or http:), for vision upstreams


@dataclass(frozen=True)
class InputGrammar:
    """The language a custom tool's one string argument, `input`, is in: a regex (Python's
    `re` syntax, matched whole) or a Lark grammar (respond/engines/grammars)."""

    syntax: Literal["lark", "regex"]
    definition: str


@dataclass(frozen=True)
class FunctionSpec:
    """A function the model may call.

    grammar: set for a custom tool, whose `parameters` are one string, `input`: what that
    string must be (the embedded engine decodes it under the grammar; an upstream's call
    is checked against it)."""

    name: str
    description: str | None
    parameters: Mapping[str, Any]
    strict: bool = True
    grammar: InputGrammar | None = None


@dataclass(frozen=True)
class ToolChoice:
    """How the model must use tools.

    mode: "auto" (text or calls), "none" (no calls), "required" (at least one call).
    allowed: the names the model may call (all tools when None).
    """

    mode: Literal["auto", "none", "required"] = "auto"
    allowed: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    top_logprobs: int = 0
    logprobs: bool = False
    seed: int | None = None
    top_k: int = 0  # 0: no top-k cut


@dataclass(frozen=True)
class Routing:
    """Which chain of turns this one belongs to, for engines in front of several servers.

    An upstream pool sends a turn to the server that served its predecessors, whose prompt
    cache holds their prefix. Engines with one model ignore it.
    """

    response_id: str | None = None  # the response this turn produces
    previous_response_id: str | None = None
    conversation: str | None = None  # a conversation id
    prompt_cache_key: str | None = None


@dataclass(frozen=True)
class SchemaFormat:
    """How the client named the JSON Schema in `ChatTurn.json_schema` (text.format).

    Only upstreams use it: they forward it as their own json_schema format.
    """

    name: str = "output"
    description: str | None = None
    strict: bool | None = None  # None: the client did not say


@dataclass
class ChatTurn:
    """Everything an engine needs to produce one assistant turn."""

    model: str
    messages: list[ChatMessage]
    tools: list[FunctionSpec] = field(default_factory=list)
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = None
    json_schema: Mapping[str, Any] | None = None  # constrain the text to this schema
    schema_format: SchemaFormat = field(default_factory=SchemaFormat)  # json_schema's name
    json_object: bool = False  # constrain the text to any JSON object
    sampling: Sampling = field(default_factory=Sampling)
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    routing: Routing = field(default_factory=Routing)
    # What the engine's `prepare` made of this turn (a built grammar, ...); only it reads this.
    prepared: Any = None


# ---------------------------------------------------------------- what comes out


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    bytes: tuple[int, ...]
    top: tuple[tuple[str, float, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ReasoningDelta:
    text: str
    summary: bool = False  # a summary of the reasoning (upstreams that summarise), not the text
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ToolCallStart:
    call_id: str
    name: str
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True)
class ToolCallArgumentsDelta:
    arguments: str
    type: Literal["tool_call_arguments"] = "tool_call_arguments"


@dataclass(frozen=True)
class ToolCallEnd:
    # The call was still open when generation ended (no markup closed it): it is whole
    # when the model ended its turn, cut short when the token limit ended it. The Finish
    # that follows tells which.
    at_end: bool = False
    type: Literal["tool_call_end"] = "tool_call_end"


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    type: Literal["usage"] = "usage"


@dataclass(frozen=True)
class Finish:
    """Why generation stopped: the model ended its turn, or a token limit cut it."""

    reason: Literal["stop", "length"]
    type: Literal["finish"] = "finish"


Delta = (
    TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallArgumentsDelta
    | ToolCallEnd
    | Usage
    | Finish
)


class EngineError(Exception):
    """Generation failed for a reason the client did not cause (model crash, upstream down).

    ``status`` is the HTTP status to answer with when nothing has been streamed yet, and
    ``param`` the request field at fault when a 4xx names one (an upstream's refusal).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "server_error",
        status: int = 500,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.param = param


class OverloadedError(EngineError):
    """Every slot is busy and the queue is full: a 429 telling the client when to retry
    (OpenAI's rate_limit_exceeded, Anthropic's overloaded_error)."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, code="rate_limit_exceeded", status=429)
        self.retry_after = retry_after  # seconds, for the Retry-After header


def model_loading() -> EngineError:
    """The error for a request that reaches a model before it has loaded."""
    return EngineError(
        "The model is still loading; retry shortly.", code="model_loading", status=503
    )


class ContextOverflowError(Exception):
    """The prompt does not fit the model's context window."""

    def __init__(self, prompt_tokens: int, context_window: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window
        super().__init__(
            f"The input is {prompt_tokens} tokens, but the model's context window is "
            f"{context_window} tokens: shorten it by at least {prompt_tokens - context_window + 1} "
            'tokens to leave room for output, or set truncation to "auto" to drop the oldest items.'
        )


class ConstraintError(Exception):
    """A schema or grammar the engine cannot build or parse: the client's to fix (a 400).

    ``tool``: the function whose parameters it is; None for the text format (or for the
    whole, when only the combination fails). ``code``: invalid_json_schema or invalid_grammar.
    """

    def __init__(
        self, message: str, *, code: str = "invalid_json_schema", tool: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.tool = tool


class UnsupportedSchemaError(Exception):
    """A JSON Schema uses a keyword this engine cannot enforce (at `where`, a dotted path)."""

    def __init__(self, keyword: str, where: str) -> None:
        super().__init__(f"unsupported JSON Schema keyword '{keyword}' at {where}")
        self.keyword = keyword
        self.where = where


@dataclass(frozen=True)
class ModelInfo:
    id: str
    owned_by: str
    context_window: int | None
    backend: str
    vision: bool = False
    upstreams: tuple[str, ...] = ()  # base URLs, for engines in front of other servers
    chat_format: str | None = None  # the embedded engine's: "tools: ..., reasoning: ..."
    # The embedded engine's devices, layers offloaded, KV-cache types (llamacpp/_placement.py).
    placement: Mapping[str, Any] | None = None
    # A model of --models-dir: "unloaded", "loading" or "loaded" (llamacpp/_on_demand.py).
    state: str | None = None


@dataclass(frozen=True)
class UpstreamLoad:
    """One server behind an engine: what it is doing now, and its failures so far."""

    url: str
    in_flight: int
    healthy: bool
    failures: int = 0  # requests to it that failed (connect, 5xx, timeout, broken stream)
    failovers: int = 0  # requests that moved on from it to another server


@dataclass(frozen=True)
class PromptCacheLoad:
    """An engine's prompt cache beyond its slots (the embedded engine's --cache-ram): what
    it holds now, and its counts so far."""

    limit_bytes: int
    bytes: int = 0
    entries: int = 0
    hits: int = 0  # prompts whose prefix was restored from it
    misses: int = 0  # prompts the slots did not hold that it could not restore either
    saves: int = 0
    evictions: int = 0  # entries dropped for room
    restored_tokens: int = 0
    failures: int = 0  # restores that failed (the prompt was evaluated instead)


@dataclass(frozen=True)
class LoadReport:
    """How busy an engine is, as /metrics shows it. Cheap to build: read at every scrape."""

    slots: int | None = None  # sequences it runs at once; None when it has no slots
    busy_slots: int = 0
    queued: int = 0  # runs waiting for a slot
    upstreams: tuple[UpstreamLoad, ...] = ()
    prompt_cache: PromptCacheLoad | None = None


class Engine(ABC):
    """A model backend. Implement ``stream``; the rest has sensible defaults."""

    info: ModelInfo

    @abstractmethod
    def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        """Yield the deltas of one assistant turn.

        The deltas follow these rules (respond checks them as they arrive, see DeltaOrder,
        and fails the response with an EngineError naming the rule that was broken):

        1. A tool call is ToolCallStart, then any ToolCallArgumentsDelta, then ToolCallEnd:
           arguments only inside an open call, ToolCallEnd only after a ToolCallStart.
        2. While a call is open nothing else comes: no text, reasoning or second call
           (calls do not nest or interleave; end one before the next item).
        3. Usage comes at most once, after all output; only Finish may follow it.
        4. Finish comes exactly once and is the last delta: the turn ends with it.

        Text and reasoning deltas may alternate freely; each change starts a new item.
        When ``turn.cancel`` is set, stop early without raising (the rules above still
        hold for what was yielded, but Usage and Finish may be left out). Raise
        EngineError for failures, ContextOverflowError when the prompt cannot fit.
        """

    async def count_tokens(self, turn: ChatTurn) -> int:
        """The number of prompt tokens ``turn`` costs (its messages, tools, template).

        Default: not supported (HTTP 501). An engine that sets ``info.context_window``
        must implement it: respond counts every prompt against the window before running.
        """
        raise EngineError(
            f"The model '{self.info.id}' cannot count input tokens.", code="unsupported", status=501
        )

    async def prepare(self, turn: ChatTurn) -> None:
        """Work that can fail because of the request, done before anything is streamed
        (building and parsing the grammar of a schema, ...), off the event loop. Keep what
        ``stream`` will reuse in ``turn.prepared``; raise ConstraintError for what the
        client must fix. Default: nothing to do."""
        return None

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        """Raise UnsupportedSchemaError if this engine would not enforce all of `schema`
        (as strict tool arguments or structured output). Default: it enforces nothing
        itself and passes schemas on (upstreams check their own)."""
        return None

    @property
    def ready(self) -> bool:
        """False while `load` runs, and after it failed (then `load_error` says why)."""
        return True

    @property
    def load_error(self) -> str | None:
        """Why `load` failed, for /health and error messages; None while all is well."""
        return None

    def load_report(self) -> LoadReport | None:
        """Its queue, slots and upstreams now, if it has any (no I/O: read at every scrape)."""
        return None

    async def health(self) -> list[dict[str, Any]] | None:
        """Reachability of the servers behind this engine (one dict each), if it has any."""
        return None

    def load(self) -> None:
        """Blocking start-up work (loading weights); run in a thread while /health says 503.

        Keep a failure in `load_error` (and report not `ready`) rather than raising.
        """
        return None

    async def aclose(self) -> None:
        return None


@runtime_checkable
class OnDemand(Protocol):
    """An engine loaded when first asked and unloaded when idle (a model of --models-dir),
    which the admin routes load and unload by hand. Not part of the public seam: only the
    embedded engine's folder of models is one."""

    @property
    def info(self) -> ModelInfo: ...

    @property
    def state(self) -> str: ...  # unloaded, loading, loaded

    async def load_now(self) -> object: ...

    async def unload(self, why: str) -> bool: ...


def not_ready(engine: Engine) -> EngineError:
    """Why a request to `engine` (not `ready`) cannot be answered: it is still loading, or
    its load failed, which waiting will not mend, so that message says why and what to do
    (a 503 either way, which OpenAI-style clients report rather than mistake for a bug)."""
    failed = engine.load_error
    if failed is None:
        return model_loading()
    return EngineError(
        f"The model '{engine.info.id}' failed to load and cannot answer: {failed}. "
        "Retrying will not help: fix the cause and restart respond.",
        code="model_load_failed",
        status=503,
    )
