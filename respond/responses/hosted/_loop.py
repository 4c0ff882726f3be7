"""The server-side tool loop: engine turns and hosted calls, in one response.

An engine turn that ends with hosted calls (and nothing for the client to do) has them
executed; their results join the context and the next engine turn continues the same
response. The loop ends when a turn ends with text only, with a call for the client (a
function call, or a hosted call that needs approval), at `max_tool_calls`, or when
`max_output_tokens` is spent over the turns (then the response is incomplete). Every
event goes through the run's one EventBuilder.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Literal

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.responses.events import EventBuilder
from respond.responses.hosted._base import Hosted
from respond.responses.hosted_call import result_text
from respond.responses.kinds import hosted_item

__all__ = ["TurnStream", "run_turns"]


@dataclass
class _Turn:
    """What the model said in one engine turn, to put back into the context."""

    text: str = ""
    reasoning: str = ""
    calls: list[d.ToolCall] = field(default_factory=list)

    def see(self, delta: d.Delta) -> None:
        if isinstance(delta, d.TextDelta):
            self.text += delta.text
        elif isinstance(delta, d.ReasoningDelta):
            self.reasoning += delta.text
        elif isinstance(delta, d.ToolCallStart):
            self.calls.append(d.ToolCall(call_id=delta.call_id, name=delta.name, arguments=""))
        elif isinstance(delta, d.ToolCallArgumentsDelta) and self.calls:
            last = self.calls[-1]
            self.calls[-1] = replace(last, arguments=last.arguments + delta.arguments)

    def message(self) -> d.ChatMessage:
        return d.ChatMessage(
            role="assistant",
            content=self.text,
            tool_calls=tuple(self.calls),
            reasoning=self.reasoning or None,
        )


# How the run streams one engine turn (checked, timed, cut at stop sequences).
TurnStream = Callable[[d.ChatTurn], AsyncGenerator[d.Delta, None]]


async def run_turns(
    stream: TurnStream, turn: d.ChatTurn, hosted: Hosted, builder: EventBuilder
) -> AsyncGenerator[ev.Event, None]:
    """The events of every engine turn and hosted call of one response (not its ending)."""
    for item in hosted.first:
        for event in builder.add(item) + builder.close():
            yield event
    messages = list(turn.messages)
    async for event in _run_approved(hosted, builder, messages):
        yield event
    calls_left = turn.max_tool_calls
    choice = turn.tool_choice
    if hosted.approved:
        # The approved calls are this response's first calls, as a forced turn's are: they
        # count against max_tool_calls and satisfy a forcing tool_choice (forced again, an
        # approval-gated tool would ask for approval again in every response).
        calls_left = None if calls_left is None else max(calls_left - len(hosted.approved), 0)
        choice = d.ToolChoice(mode=_after_calls(choice, calls_left), allowed=choice.allowed)
    cancel = turn.cancel
    tools = list(turn.tools)  # grows by the tools a hosted call loads (a search of deferred ones)
    # A compaction's summary, written before the loop, has its own budget (compacting.py).
    before = builder.output_tokens
    while True:
        budget = _budget(turn.max_output_tokens, builder.output_tokens - before)
        if budget == 0:
            builder.limit_reached()
            return
        said = _Turn()
        this_turn = replace(
            turn,
            messages=messages,
            tools=tools,
            tool_choice=choice,
            max_output_tokens=budget,
            max_tool_calls=calls_left,
            cancel=cancel,
            # What the engine prepared (its grammar) is for the first turn's tool_choice; a
            # later turn chooses again, so the engine plans it afresh from the same tools.
            prepared=turn.prepared if choice is turn.tool_choice else None,
        )
        async with aclosing(stream(this_turn)) as deltas:
            async for delta in deltas:
                said.see(delta)
                for event in builder.push(delta):
                    yield event
        if builder.cut or not builder.calling:
            return
        messages.append(said.message())
        loaded: list[d.FunctionSpec] = []
        async for event in _run_calls(hosted, builder, said, messages, loaded):
            yield event
        tools = [*tools, *loaded]  # a new list: the turns so far keep what they saw
        if any(call.name not in hosted.tools or _asks(hosted, call) for call in said.calls):
            return  # the client has to act: run a function, or approve a call
        if calls_left is not None:
            calls_left -= len(said.calls)
        # Forcing applies to the first turn only; no calls are left at max_tool_calls.
        choice = d.ToolChoice(mode=_after_calls(choice, calls_left), allowed=choice.allowed)
        # An engine sets its turn's cancel flag when its stream ends, so each turn gets its
        # own; a consumer that leaves closes this loop, and the open engine stream with it.
        cancel = threading.Event()


def _after_calls(choice: d.ToolChoice, calls_left: int | None) -> Literal["auto", "none"]:
    """The tool_choice mode once the response has made calls: no longer forced."""
    return "none" if calls_left == 0 or choice.mode == "none" else "auto"


def _asks(hosted: Hosted, call: d.ToolCall) -> bool:
    return hosted.tools[call.name].needs_approval


def _budget(limit: int | None, spent: int) -> int | None:
    """What is left of max_output_tokens after the turns so far (`spent` tokens)."""
    if limit is None:
        return None
    return max(limit - spent, 0)


async def _run_calls(
    hosted: Hosted,
    builder: EventBuilder,
    said: _Turn,
    messages: list[d.ChatMessage],
    loaded: list[d.FunctionSpec],
) -> AsyncGenerator[ev.Event, None]:
    """Execute this turn's hosted calls, in the order the model made them; the functions
    their searches loaded are added to `loaded`."""
    runnable = [c for c in said.calls if c.name in hosted.tools and not _asks(hosted, c)]
    item_ids = list(builder.calling)
    assert len(item_ids) == len(runnable), "every runnable call has an open item"
    for call, item_id in zip(runnable, item_ids, strict=True):
        tool = hosted.tools[call.name]
        result = await tool.executor.call(tool.name, call.arguments)
        for event in builder.call_done(item_id, result):
            yield event
        messages.append(_result_message(call.call_id, result.output, result.error))
        loaded += result.shown


async def _run_approved(
    hosted: Hosted, builder: EventBuilder, messages: list[d.ChatMessage]
) -> AsyncGenerator[ev.Event, None]:
    """Calls the client approved: they run first, answering their approval requests
    (whose calls the context already holds)."""
    for approved in hosted.approved:
        tool = approved.tool
        opened = builder.add(hosted_item(tool, approved.approval_request_id))
        arguments = builder.push(d.ToolCallArgumentsDelta(approved.arguments))
        for event in opened + arguments + builder.close():
            yield event
        (item_id,) = builder.calling
        result = await tool.executor.call(tool.name, approved.arguments)
        for event in builder.call_done(item_id, result):
            yield event
        messages.append(_result_message(approved.approval_request_id, result.output, result.error))


def _result_message(call_id: str, output: str | None, error: object) -> d.ChatMessage:
    return d.ChatMessage(role="tool", content=result_text(output, error), tool_call_id=call_id)
