"""A run: one Responses request turned into events, from validated body to terminal event.

`prepare` does everything that can fail because of the request (unknown model, bad
input, context too long) and raises APIError before anything is streamed. `events`
then never raises: whatever happens, it ends with exactly one terminal event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from respond._ids import new_id
from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    ConstraintError,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    OverloadedError,
    Routing,
    Sampling,
    SchemaFormat,
    model_loading,
)
from respond.engines._order import checked
from respond.metrics import Metrics, RunClock
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.limits import Limits
from respond.protocol.requests import (
    CreateResponseBody,
    InputItem,
    TextFormat,
    TextFormatJsonSchema,
)
from respond.protocol.resource import ReasoningConfig, ResponseResource, TextConfig
from respond.responses._stops import StopSequences
from respond.responses.context import items_to_messages
from respond.responses.events import EventBuilder
from respond.responses.history import Context, History, still_running
from respond.responses.hosted import Hosted
from respond.responses.hosted._loop import TurnStream, run_turns
from respond.responses.hosted.file_search import FileSearchTools
from respond.responses.hosted.mcp import McpTools, echo_mcp_tool
from respond.responses.limits import check_request
from respond.responses.sealing import ENCRYPTED_INCLUDE, Sealer, open_reasoning
from respond.responses.tools import (
    check_call_ids,
    custom_tool_names,
    enforceable,
    function_specs,
    text_constraint,
    tool_choice,
)
from respond.store.base import JSON

__all__ = ["PreparedRun", "ResponseRecorder", "Responses", "api_error"]

log = logging.getLogger("respond.run")

LOGPROBS_INCLUDE = "message.output_text.logprobs"


class ResponseRecorder(Protocol):
    """Where finished runs are kept (the store). Called once per run, at its end."""

    async def record(
        self,
        tenant: str | None,
        input_items: list[JSON],
        response: ResponseResource,
        events: list[ev.Event],
    ) -> None: ...


def api_error(exc: EngineError) -> APIError:
    """An engine's failure as the client sees it when nothing has been streamed yet."""
    headers = {}
    if isinstance(exc, OverloadedError):
        headers["Retry-After"] = str(exc.retry_after)
    return APIError(exc.status, exc.message, code=exc.code, param=exc.param, headers=headers)


@dataclass
class PreparedRun:
    body: CreateResponseBody
    engine: Engine
    turn: ChatTurn
    resource: ResponseResource
    input_items: list[JSON]
    # The run's stream state: its events so far, and the response they fold into.
    builder: EventBuilder
    tenant: str | None = None
    # The HTTP status of a failed run answered as JSON (nothing streamed yet).
    failure_status: int = field(default=500)
    failure_param: str | None = None  # the field at fault, when a failure names one
    # Every item the turn was built from (history, then this input), as the engine saw them.
    context: list[InputItem] = field(default_factory=list)
    # False for a WebSocket warm-up (`generate: false`): a response with no output.
    generate: bool = True
    # The stop sequence (body.stop) the text ended at, once it has.
    stop_sequence: str | None = None
    # The tools respond runs itself (MCP), listed and resolved by prepare.
    hosted: Hosted = field(default_factory=Hosted)


class Responses:
    """Runs Responses requests against a set of engines."""

    def __init__(
        self,
        engines: Mapping[str, Engine],
        *,
        recorder: ResponseRecorder | None = None,
        history: History | None = None,
        clock: Callable[[], float] = time.time,
        n_predict: int | None = None,
        temperature: float = 1.0,
        limits: Limits | None = None,
        metrics: Metrics | None = None,
        mcp: McpTools | None = None,
        reasoning_events: ev.ReasoningEvents = "openai",
    ) -> None:
        if not engines:
            raise ValueError("at least one engine is needed")
        self.engines = dict(engines)
        self.recorder = recorder
        self.history = history or History(None)
        self._clock = clock
        # The server's default for max_output_tokens (`--n-predict`): clients such as Codex
        # never set one, and a small local model may otherwise ramble to the context's end.
        self.n_predict = n_predict
        self.temperature = temperature  # `--temp`: for requests that set none
        self.limits = limits or Limits()
        self._running: set[str] = set()  # ids of the runs this process is streaming now
        self.metrics = metrics or Metrics()
        self.mcp = mcp or McpTools()
        # Set by the app once its file service exists (it needs the background runner).
        self.file_search = FileSearchTools()
        self.reasoning_events = reasoning_events  # `--reasoning-events`: how reasoning streams

    @property
    def sealer(self) -> Sealer:
        """The server's sealing key (kept by History, which also opens compaction items)."""
        return self.history.sealer

    # ------------------------------------------------------------ preparing

    def engine_for(self, model: str | None) -> Engine:
        if model is None:
            return next(iter(self.engines.values()))
        engine = self.engines.get(model)
        if engine is None:
            available = ", ".join(sorted(self.engines))
            raise APIError(
                404,
                f"The model '{model}' does not exist. Available models: {available}.",
                param="model",
                code="model_not_found",
            )
        return engine

    async def prepare(
        self,
        body: CreateResponseBody,
        *,
        tenant: str | None = None,
        remembered: Sequence[InputItem] | None = None,
        stored: tuple[str, int] | None = None,
    ) -> PreparedRun:
        """Validate and assemble a run; every request error is raised here.

        `remembered` is the context before this input when the caller already holds it (a
        WebSocket connection remembers the responses it created, store:false ones too);
        previous_response_id is then not looked up in the store. `stored` is the (id,
        created_at) of a queued response this run starts (the background queue).
        """
        engine, turn, context, hosted = await self.assemble(body, tenant, remembered)
        await self._prepare_turn(body, engine, turn)
        truncation = body.truncation or "disabled"
        await self._fit(engine, turn, truncation)
        resource = self._resource(body, engine, stored)
        turn.routing = _routing(body, resource.id)
        if context.conversation_id is not None:
            resource.conversation = {"id": context.conversation_id}
        seal = self.sealer.seal if ENCRYPTED_INCLUDE in body.include else None
        builder = EventBuilder(
            resource,
            seal_reasoning=seal,
            custom_tools=custom_tool_names(body),
            hosted=hosted.tools,
            reasoning_events=self.reasoning_events,
        )
        return PreparedRun(
            body=body,
            engine=engine,
            turn=turn,
            resource=resource,
            input_items=context.new_stored,
            builder=builder,
            tenant=tenant,
            context=context.items,
            hosted=hosted,
        )

    async def assemble(
        self,
        body: CreateResponseBody,
        tenant: str | None,
        remembered: Sequence[InputItem] | None = None,
    ) -> tuple[Engine, ChatTurn, Context, Hosted]:
        """The engine and the turn a body asks for, with stored history in front of its input,
        and the hosted tools it uses (MCP servers: resolved, allowed and listed)."""
        check_request(body, self.limits)
        engine = self.engine_for(body.model)
        if not engine.ready:
            raise api_error(model_loading())
        if body.previous_response_id in self._running and remembered is None:
            raise still_running(body.previous_response_id)
        context = await self.history.context(body, tenant, remembered=remembered)
        context.new = open_reasoning(context.new, self.sealer)
        check_call_ids(context.items, new_from=len(context.history))
        vision = engine.info.vision
        items_to_messages(context.new, vision=vision)  # errors name the client's input index
        hosted = await self.mcp.prepare(body, context.history, context.new)
        searching, forced = await self.file_search.prepare(body, tenant)
        hosted.tools.update(searching)
        if forced:
            hosted.forced = tuple(searching)
        messages = items_to_messages(context.items, vision=vision, mcp_names=hosted.visible)
        if body.instructions:
            messages.insert(0, ChatMessage(role="system", content=body.instructions))
        return engine, self._turn(body, engine, messages, hosted), context, hosted

    async def count_input_tokens(self, body: CreateResponseBody, tenant: str | None) -> int:
        engine, turn, _, _ = await self.assemble(body, tenant)
        return await self.count_tokens(engine, turn)

    async def count_tokens(self, engine: Engine, turn: ChatTurn) -> int:
        """The prompt tokens `turn` costs; an engine's failure is raised as an APIError."""
        try:
            return await engine.count_tokens(turn)
        except EngineError as exc:
            raise api_error(exc) from exc

    def _turn(
        self,
        body: CreateResponseBody,
        engine: Engine,
        messages: list[ChatMessage],
        hosted: Hosted,
    ) -> ChatTurn:
        specs = function_specs(body, engine) + hosted.specs(lambda s: enforceable(engine, s))
        json_schema, json_object = text_constraint(body, engine)
        return ChatTurn(
            model=engine.info.id,
            messages=messages,
            tools=specs,
            tool_choice=tool_choice(body, specs, hosted.forced),
            parallel_tool_calls=body.parallel_tool_calls,
            max_tool_calls=body.max_tool_calls,
            json_schema=json_schema,
            json_object=json_object,
            schema_format=_schema_format(body.text.format),
            sampling=Sampling(
                temperature=self._temperature(body),
                top_p=1.0 if body.top_p is None else body.top_p,
                presence_penalty=body.presence_penalty or 0.0,
                frequency_penalty=body.frequency_penalty or 0.0,
                top_logprobs=body.top_logprobs or 0,
                logprobs=LOGPROBS_INCLUDE in body.include,
                seed=body.seed,
                top_k=body.top_k or 0,
            ),
            max_output_tokens=body.max_output_tokens or self.n_predict,
            reasoning_effort=body.reasoning.effort if body.reasoning else None,
            routing=Routing(prompt_cache_key=body.prompt_cache_key),
        )

    def _temperature(self, body: CreateResponseBody) -> float:
        return self.temperature if body.temperature is None else body.temperature

    async def _prepare_turn(self, body: CreateResponseBody, engine: Engine, turn: ChatTurn) -> None:
        """The engine's prepare-time work (grammars): what it cannot build is a 400 now."""
        try:
            await engine.prepare(turn)
        except ConstraintError as exc:
            raise APIError(
                400, exc.message, param=_constraint_param(body, exc), code=exc.code
            ) from exc
        except EngineError as exc:
            raise api_error(exc) from exc

    async def _fit(self, engine: Engine, turn: ChatTurn, truncation: str) -> None:
        """Make the prompt fit the context window, or explain by how much it does not.

        With truncation "auto" the oldest items are dropped: how many is found by a binary
        search, so a long history costs O(log n) tokenizations, not one per dropped item.
        """
        window = engine.info.context_window
        if window is None or (engine.info.upstreams and truncation != "auto"):
            # An upstream reports an overflow itself (a 400 context_length_exceeded): its
            # prompts cost a round trip to count, so they are counted only to truncate.
            return
        tokens = await self.count_tokens(engine, turn)
        if tokens < window:
            return
        droppable = sum(m.role != "system" for m in turn.messages) - 1  # keep the newest
        if truncation != "auto" or droppable < 1:
            overflow = ContextOverflowError(tokens, window)
            raise APIError(
                400, str(overflow), param="input", code="context_length_exceeded"
            ) from overflow  # the numbers, for APIs that word this their own way
        messages = turn.messages
        fits: list[ChatMessage] | None = None
        low, high = 1, droppable  # invariant: dropping fewer than `low` does not fit
        while low <= high:
            middle = (low + high) // 2
            turn.messages = _without_oldest(messages, middle)
            tokens = await self.count_tokens(engine, turn)
            if tokens < window:
                fits, high = turn.messages, middle - 1
            else:
                low = middle + 1
        if fits is None:
            overflow = ContextOverflowError(tokens, window)
            raise APIError(
                400, str(overflow), param="input", code="context_length_exceeded"
            ) from overflow  # the numbers, for APIs that word this their own way
        turn.messages = fits

    def _resource(
        self, body: CreateResponseBody, engine: Engine, stored: tuple[str, int] | None = None
    ) -> ResponseResource:
        text = TextConfig(
            format=_echo_format(body.text.format),
            verbosity=body.text.verbosity or "medium",
        )
        reasoning = body.reasoning
        return ResponseResource(
            id=stored[0] if stored else new_id("resp"),
            created_at=stored[1] if stored else int(self._clock()),
            status="queued" if body.background else "in_progress",
            model=engine.info.id,
            previous_response_id=body.previous_response_id,
            instructions=body.instructions,
            tools=_echo_tools(body.tools),
            tool_choice=_echo_tool_choice(body.tool_choice),
            truncation=body.truncation or "disabled",
            parallel_tool_calls=body.parallel_tool_calls,
            text=text,
            top_p=1.0 if body.top_p is None else body.top_p,
            presence_penalty=body.presence_penalty or 0.0,
            frequency_penalty=body.frequency_penalty or 0.0,
            top_logprobs=body.top_logprobs or 0,
            temperature=self._temperature(body),
            reasoning=ReasoningConfig(
                effort=reasoning.effort if reasoning else None,
                summary=reasoning.summary if reasoning else None,
            ),
            max_output_tokens=body.max_output_tokens or self.n_predict,
            max_tool_calls=body.max_tool_calls,
            store=True if body.store is None else body.store,
            background=bool(body.background),
            service_tier=body.service_tier or "default",
            metadata=body.metadata or {},
            safety_identifier=body.safety_identifier,
            prompt_cache_key=body.prompt_cache_key,
            user=body.user,
        )

    # ------------------------------------------------------------ running

    async def events(self, run: PreparedRun) -> AsyncGenerator[ev.Event, None]:
        """The run's events, from response.created to exactly one terminal event."""
        builder = run.builder
        recorded = False
        self._running.add(run.resource.id)
        clock = self.metrics.run_clock(run.resource.model)
        try:
            for event in builder.start():
                yield event
            if builder.response.status == "queued":
                # A background run: its worker resumes this generator when it starts.
                for event in builder.begin():
                    yield event
            try:
                if run.generate:
                    clock.begin()
                    turns = run_turns(self._stream(run, clock), run.turn, run.hosted, builder)
                    async with aclosing(turns) as loop:
                        async for event in loop:
                            yield event
                ending = builder.finish()
            except EngineError as exc:
                run.failure_status, run.failure_param = exc.status, exc.param
                ending = builder.fail(exc.code, exc.message)
            except ContextOverflowError as exc:
                run.failure_status, run.failure_param = 400, "input"
                ending = builder.fail("context_length_exceeded", str(exc))
            except Exception as exc:
                log.exception("run %s failed", run.resource.id)
                ending = builder.fail("server_error", f"The server had an error: {exc}")
            for event in ending[:-1]:
                yield event
            # Stored before done: a client that has seen the terminal event may at once
            # GET the response, chain on it or start the next turn, on any replica.
            recorded = True
            clock.ended(builder.response)
            with anyio.CancelScope(shield=True):
                await self._record(run, builder)
            self._running.discard(run.resource.id)
            yield ending[-1]
        finally:
            self._running.discard(run.resource.id)
            if not recorded:
                if not builder.ended:
                    # The consumer left (client disconnect): generation has stopped; keep
                    # what was produced, marked cancelled, without yielding more.
                    run.turn.cancel.set()
                    builder.cancel()
                clock.ended(builder.response)
                with anyio.CancelScope(shield=True):
                    await self._record(run, builder)

    def _stream(self, run: PreparedRun, clock: RunClock) -> TurnStream:
        """How the run asks its engine for one turn's deltas (the hosted-tool loop may ask
        several times): checked against the delta rules, timed, cut at a stop sequence."""
        stops = StopSequences(run.body.stop)

        async def stream(turn: ChatTurn) -> AsyncGenerator[Delta, None]:
            async with aclosing(checked(run.engine.stream(turn), turn.cancel)) as deltas:
                async for delta in deltas:
                    clock.saw(delta)
                    for kept in stops.push(delta):
                        yield kept
                    if stops.matched is not None and run.stop_sequence is None:
                        run.stop_sequence = stops.matched
                        turn.cancel.set()  # the engine ends the turn with Usage and Finish

        return stream

    async def _record(self, run: PreparedRun, builder: EventBuilder) -> None:
        if self.recorder is None or not run.resource.store:
            return
        try:
            await self.recorder.record(
                run.tenant, run.input_items, builder.response, builder.events
            )
        except Exception:
            log.exception("could not store response %s", run.resource.id)


def _without_oldest(messages: list[ChatMessage], count: int) -> list[ChatMessage]:
    """`messages` less the `count` oldest non-system ones, and any tool results that would
    then lead the context without the call they answer."""
    kept: list[ChatMessage] = []
    dropped = 0
    leading = True  # no non-system message kept yet
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        if message.role == "system":
            kept.append(message)
        elif not last and (dropped < count or (leading and message.role == "tool")):
            dropped += 1
        else:
            kept.append(message)
            leading = False
    return kept


def _constraint_param(body: CreateResponseBody, exc: ConstraintError) -> str:
    """The field a schema the engine refused came from."""
    if exc.tool is None:
        return (
            "text.format.schema" if isinstance(body.text.format, TextFormatJsonSchema) else "tools"
        )
    for index, tool in enumerate(body.tools):
        if tool.get("name") == exc.tool:
            return (
                f"tools[{index}].format"
                if tool.get("type") == "custom"
                else f"tools[{index}].parameters"
            )
    return "tools"


def _routing(body: CreateResponseBody, response_id: str) -> Routing:
    """What upstream engines use to keep a chain of turns on one server."""
    conversation = body.conversation
    return Routing(
        response_id=response_id,
        previous_response_id=body.previous_response_id,
        conversation=conversation if isinstance(conversation, str | None) else conversation.id,
        prompt_cache_key=body.prompt_cache_key,
    )


def _schema_format(fmt: TextFormat) -> SchemaFormat:
    """How the client named its json_schema format, for upstreams that forward it."""
    if isinstance(fmt, TextFormatJsonSchema):
        return SchemaFormat(name=fmt.name, description=fmt.description, strict=fmt.strict)
    return SchemaFormat()


def _echo_format(fmt: TextFormat) -> dict[str, Any]:
    echoed: dict[str, Any] = fmt.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(fmt, TextFormatJsonSchema):
        # The response echoes every json_schema field; strict defaults to false as in OpenAI's API.
        echoed.update(description=fmt.description, strict=bool(fmt.strict))
    return echoed


def _echo_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The function and MCP tools, as the response echoes them (MCP without its secrets)."""
    echoed = []
    for tool in tools:
        if tool.get("type") == "function":
            echoed.append(_echo_tool(tool))
        elif tool.get("type") == "mcp":
            echoed.append(echo_mcp_tool(tool))
        elif tool.get("type") == "file_search":
            echoed.append(tool)
    return echoed


def _echo_tool(tool: dict[str, Any]) -> dict[str, Any]:
    strict = tool.get("strict")
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool.get("description"),
        "parameters": tool.get("parameters"),
        "strict": True if strict is None else strict,
    }


def _echo_tool_choice(choice: Any) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        return choice
    dumped: dict[str, Any] = choice.model_dump(mode="json", exclude_none=True)
    return dumped
