"""A run: one Responses request turned into events, from validated body to terminal event.

`prepare` does everything that can fail because of the request (unknown model, bad
input, context too long) and raises APIError before anything is streamed. `events`
then never raises: whatever happens, it ends with exactly one terminal event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, Protocol

import anyio

from respond._config import DEFAULTS
from respond._ids import new_id
from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    ConstraintError,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    FunctionSpec,
    OverloadedError,
    Routing,
    Sampling,
    SchemaFormat,
    not_ready,
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
from respond.protocol.resource import ResponseResource
from respond.protocol.tools import CustomTool, FunctionTool, Tool
from respond.responses import echo
from respond.responses._stops import StopSequences
from respond.responses.compacting import Compacting, compact, plan
from respond.responses.context import items_to_messages
from respond.responses.deferred import Loading, loading
from respond.responses.events import EventBuilder
from respond.responses.history import Context, History, still_running
from respond.responses.hosted import Deferred, Hosted, Request, Toolsets, families
from respond.responses.hosted._loop import TurnStream, run_turns
from respond.responses.images import ImageSources
from respond.responses.kinds import Kinds, calls_for
from respond.responses.kinds.namespace import Names, described
from respond.responses.limits import check_request
from respond.responses.sealing import ENCRYPTED_INCLUDE, Sealer, open_reasoning
from respond.responses.tools import (
    check_call_ids,
    enforceable,
    function_specs,
    text_constraint,
    tool_choice,
)
from respond.responses.window import fit
from respond.store.base import JSON, StoreFullError, StoreUnavailableError

__all__ = ["PreparedRun", "ResponseRecorder", "Responses", "api_error"]

log = logging.getLogger("respond.run")

RECORD_TRIES = 3  # a finished run's record, while the store is unreachable

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
    # The tools respond runs itself (hosted/), offered by its families at prepare.
    hosted: Hosted = field(default_factory=Hosted)
    # (code, message) when the server stops the run: it ends failed so, not cancelled.
    stopped: tuple[str, str] | None = None
    # Why the finished run could not be stored, if it could not (a full disk).
    unsaved: Exception | None = None
    # The compaction the run does before it answers (`context_management`), when one is due.
    compacting: Compacting | None = None


class Responses:
    """Runs Responses requests against a set of engines."""

    def __init__(
        self,
        engines: Mapping[str, Engine],
        *,
        recorder: ResponseRecorder | None = None,
        history: History | None = None,
        clock: Callable[[], float] = time.time,
        n_predict: int | None = DEFAULTS.n_predict,
        temperature: float = DEFAULTS.temperature,
        limits: Limits | None = None,
        metrics: Metrics | None = None,
        hosted: Toolsets | None = None,
        reasoning_events: ev.ReasoningEvents = "openai",
        images: ImageSources | None = None,
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
        # The hosted families (hosted/), each made with what it runs with.
        self.hosted = hosted or families()
        self.reasoning_events = reasoning_events  # `--reasoning-events`: how reasoning streams
        # Where input images are read from or fetched, for a vision model (images.py).
        self.images = images or ImageSources(None)

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
        count = partial(self.count_tokens, engine)
        compacting = await plan(
            body,
            engine,
            turn,
            context.items,
            count=count,
            messages_of=partial(
                self._messages, body, engine, hosted, loading(body.tools, context.items).tools
            ),
            seal=partial(self.sealer.seal_items, tenant=tenant),
        )
        # A compacted run is answered without the older items: those need not fit.
        fitted = turn if compacting is None else compacting.without_summary
        await fit(engine, fitted, body.truncation or "disabled", count)
        resource = echo.resource(
            body,
            engine.info.id,
            response_id=stored[0] if stored else new_id("resp"),
            created_at=stored[1] if stored else int(self._clock()),
            temperature=self._temperature(body),
            max_output_tokens=body.max_output_tokens or self.n_predict,
        )
        resource.tools = self.hosted.echoed(resource.tools)
        turn.routing = _routing(body, resource.id)
        if context.conversation_id is not None:
            resource.conversation = {"id": context.conversation_id}
        seal = self.sealer.seal if ENCRYPTED_INCLUDE in body.include else None
        kinds = Kinds(
            calls_for(loading(body.tools, context.items).tools, hosted.tools),
            seal_reasoning=seal,
            reasoning_events=self.reasoning_events,
        )
        builder = EventBuilder(resource, kinds=kinds)
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
            compacting=compacting,
        )

    async def assemble(
        self,
        body: CreateResponseBody,
        tenant: str | None,
        remembered: Sequence[InputItem] | None = None,
    ) -> tuple[Engine, ChatTurn, Context, Hosted]:
        """The engine and the turn a body asks for, with stored history in front of its input,
        and the hosted tools its families offer it."""
        check_request(body, self.limits)
        engine = self.engine_for(body.model)
        if not engine.ready:
            raise api_error(not_ready(engine))
        if body.previous_response_id in self._running and remembered is None:
            raise still_running(body.previous_response_id)
        context = await self.history.context(body, tenant, remembered=remembered)
        context.new = open_reasoning(context.new, self.sealer)
        check_call_ids(context.items, new_from=len(context.history))
        vision = engine.info.vision
        items_to_messages(context.new, vision=vision)  # errors name the client's input index
        if vision:
            await self._read_images(context, engine, tenant)
        functions = _Functions(body, engine, context.items)
        request = Request(
            body,
            tenant,
            context.history,
            context.new,
            enforceable=functions.enforceable,
            deferred=functions.deferred,
        )
        hosted = await self.hosted.prepare(request)
        tools, seen, specs = functions.loaded, functions.seen, functions.specs
        messages = self._messages(body, engine, hosted, tools.tools, context.items)
        shown = [spec for spec in specs if spec.name not in tools.hidden]
        return engine, self._turn(seen, engine, messages, hosted, shown), context, hosted

    async def _read_images(self, context: Context, engine: Engine, tenant: str | None) -> None:
        """The context's images by file id (and, for an engine that reads image bytes, by
        URL) given by data URL instead, before anything is replayed for the engine."""
        n = len(context.history)
        items = await self.images.resolve(
            context.items, tenant=tenant, fetch_urls=engine.info.image_bytes, new_from=n
        )
        context.history, context.new = items[:n], items[n:]

    def _messages(
        self,
        body: CreateResponseBody,
        engine: Engine,
        hosted: Hosted,
        tools: Sequence[Tool],
        items: Sequence[InputItem],
    ) -> list[ChatMessage]:
        """The chat the model reads: the instructions, then `items` replayed; `tools` are
        the request's the model sees."""
        messages = items_to_messages(
            items,
            vision=engine.info.vision,
            hosted_names=hosted.visible,
            namespaced=Names(tools).visible,
        )
        # Namespaces are told once, here, not in each of their members (kinds/namespace.py).
        system = "\n\n".join(filter(None, (body.instructions, described(tools))))
        if system:
            messages.insert(0, ChatMessage(role="system", content=system))
        return messages

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
        shown: list[FunctionSpec],
    ) -> ChatTurn:
        """The engine's turn; `shown`: the request's functions the model sees (its deferred
        tools left out until loaded), to which the hosted tools are added."""
        specs = shown + hosted.specs(lambda s: enforceable(engine, s))
        json_schema, json_object = text_constraint(body, engine)
        return ChatTurn(
            model=engine.info.id,
            messages=messages,
            tools=specs,
            tool_choice=tool_choice(body, specs, hosted.forced, hosted.tools),
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
                    if run.compacting is not None:
                        truncation = run.body.truncation or "disabled"
                        compacted = compact(run.compacting, builder, run.turn, truncation)
                        async with aclosing(compacted) as compacting:
                            async for event in compacting:
                                yield event
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
                    if run.stopped is not None:
                        builder.fail(*run.stopped)
                    else:
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
        recorder = self.recorder
        if recorder is None or not run.resource.store:
            return
        try:
            await _retried(
                lambda: recorder.record(
                    run.tenant, run.input_items, builder.response, builder.events
                )
            )
        except (StoreFullError, StoreUnavailableError) as exc:
            log.error("could not store response %s: %s", run.resource.id, exc)
            run.unsaved = exc
        except Exception as exc:
            log.exception("could not store response %s", run.resource.id)
            run.unsaved = exc


async def _retried(write: Callable[[], Awaitable[None]], tries: int = RECORD_TRIES) -> None:
    """A finished run's record, tried again while the store is unreachable (it waits for a
    restarting database itself, RECONNECT_SECONDS a try): the record replaces what it writes,
    so a try that failed leaves nothing a second one would duplicate."""
    for attempt in range(tries):
        try:
            await write()
            return
        except StoreUnavailableError:
            if attempt == tries - 1:
                raise
            log.warning("the store is unreachable; recording again (%d/%d)", attempt + 2, tries)


class _Functions:
    """The request's own tools as the model sees them: less the deferred ones no search
    loaded. Worked out when first asked for (by a family that searches deferred tools, or
    after the families), so that a family's request errors come before these tools' own."""

    def __init__(self, body: CreateResponseBody, engine: Engine, items: list[InputItem]) -> None:
        self.body, self.engine, self.items = body, engine, items

    @cached_property
    def loaded(self) -> Loading:
        return loading(self.body.tools, self.items)

    @cached_property
    def seen(self) -> CreateResponseBody:
        """The body with the tools the model sees."""
        return self.body.model_copy(update={"tools": self.loaded.tools})

    @cached_property
    def specs(self) -> list[FunctionSpec]:
        return function_specs(self.seen, self.engine)

    def deferred(self) -> list[Deferred]:
        """The deferred functions a search may load."""
        hidden = self.loaded.hidden
        return [Deferred(spec, hidden[spec.name]) for spec in self.specs if spec.name in hidden]

    def enforceable(self, schema: Mapping[str, Any]) -> bool:
        return enforceable(self.engine, schema)


def _constraint_param(body: CreateResponseBody, exc: ConstraintError) -> str:
    """The field a schema the engine refused came from."""
    if exc.tool is None:
        return (
            "text.format.schema" if isinstance(body.text.format, TextFormatJsonSchema) else "tools"
        )
    for index, tool in enumerate(body.tools):
        if isinstance(tool, CustomTool) and tool.name == exc.tool:
            return f"tools[{index}].format"
        if isinstance(tool, FunctionTool) and tool.name == exc.tool:
            return f"tools[{index}].parameters"
    for member in Names(body.tools).members:
        if member.visible == exc.tool:
            field = "format" if isinstance(member.tool, CustomTool) else "parameters"
            return f"{member.where}.{field}"
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
