"""Compaction inside a run: `context_management: [{"type": "compaction", "compact_threshold": N}]`.

OpenAI's server-side compaction, as its compaction guide describes it: when the rendered
context passes the threshold, the server compacts it, emits a `compaction` item in the same
response and answers from the compacted context; the next turn (previous_response_id, or
the output sent back as input) starts from that item. respond does it on every engine, for
a context (history and input, counted in the model's tokens as /v1/responses/input_tokens
counts it) of more than N tokens:

- the newest part, the last user message and every item after it, is kept verbatim;
- the older part, everything before it, is summarized by the same engine in an engine turn
  of its own, before the answer and through the run's EventBuilder (the item's
  `response.compaction.compacting` events, its tokens in `usage`): that turn is the
  context as the model read it up to the newest part, then SUMMARY_REQUEST, shown no tools
  (so, for a request without tools, an engine that kept the previous turn's prompt in its
  cache reads little more than the request);
- the `compaction` item, first in the output (kinds/compaction.py), carries the compacted
  context sealed for the tenant: SUMMARY_REQUEST and the summary as one exchange, then the
  kept items. Opened again (history.py), the model reads that exchange where the older
  items were. It carries nothing else of the older part: it travels with every stateless
  request, so it must stay small; stored responses keep their own items (GET, input_items);
- the answer is generated from the compacted context, under the request's truncation.

There is no compaction when there is no older part, or when it is too short (MIN_OLDER
tokens) for a summary to make it shorter: a summary gets at most half the older part's
tokens (and SUMMARY_TOKENS). The threshold says when to compact, not how long the context
may be: a compacted context still over it is answered (the newest part is never
summarized), and only the model's window is a limit. A summary turn that does not fit the
window summarizes the newest older items that do, from a user message on. When the summary
comes back empty the item keeps the context whole, and the answer reads that context.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

from respond.engines import _base as d
from respond.engines._order import checked
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody, InputItem, InputMessage
from respond.responses.context import stored_item
from respond.responses.events import EventBuilder
from respond.responses.kinds.compaction import Compaction
from respond.responses.window import Counter, fit
from respond.store.base import JSON

__all__ = ["MIN_OLDER", "SUMMARY_REQUEST", "SUMMARY_TOKENS", "Compacting", "compact", "plan"]

SUMMARY_REQUEST = (
    "Summarize our conversation so far in a few sentences: the facts, decisions and open "
    "tasks needed to continue it."
)
SUMMARY_TOKENS = 256  # the longest summary
MIN_OLDER = 64  # the shortest older part worth a summary (of at most half its tokens)
DEFAULT_SHARE = 0.75  # without compact_threshold: this share of the model's window

# The chat a list of items replays into, with the request's instructions (run.py).
MessagesOf = Callable[[Sequence[InputItem]], list[d.ChatMessage]]


@dataclass
class Compacting:
    """A compaction `plan` found due: the run carries it out before it answers."""

    engine: d.Engine
    summary: d.ChatTurn  # the engine turn that writes the summary
    kept: list[InputItem]  # the newest items, kept verbatim
    whole: str  # the context as it was, sealed: what the item carries until it is compacted
    seal: Callable[[list[JSON]], str]  # items -> a compaction item's encrypted_content
    messages_of: MessagesOf
    count: Counter
    without_summary: d.ChatTurn  # the answer's turn with the kept items only


async def plan(
    body: CreateResponseBody,
    engine: d.Engine,
    turn: d.ChatTurn,
    items: Sequence[InputItem],
    *,
    count: Counter,
    messages_of: MessagesOf,
    seal: Callable[[list[JSON]], str],
) -> Compacting | None:
    """The compaction this request needs now (None: none asked, or none due)."""
    threshold = _threshold(body, engine)
    if threshold is None:
        return None
    tokens = await count(turn)
    newest = _newest(items)
    if tokens <= threshold or newest == 0:  # not due, or nothing before the last user message
        return None
    kept = list(items[newest:])
    without_summary = replace(turn, messages=messages_of(kept))
    older = tokens - await count(without_summary)
    if older < MIN_OLDER:
        return None
    summary = replace(
        turn,
        messages=messages_of([*items[:newest], _request()]),
        tools=[],
        tool_choice=d.ToolChoice(mode="none"),
        max_tool_calls=None,
        json_schema=None,
        json_object=False,
        sampling=replace(turn.sampling, logprobs=False, top_logprobs=0),
        max_output_tokens=min(SUMMARY_TOKENS, older // 2),
        cancel=threading.Event(),  # an engine sets it when the turn ends: not the answer's
        prepared=None,
    )
    whole = len(summary.messages)
    await fit(engine, summary, "auto", count)  # the oldest older items go if need be
    if len(summary.messages) < whole:
        summary.messages = _from_a_user(summary.messages)
    return Compacting(
        engine=engine,
        summary=summary,
        kept=kept,
        whole=seal([stored_item(item) for item in items]),
        seal=seal,
        messages_of=messages_of,
        count=count,
        without_summary=without_summary,
    )


async def compact(
    compacting: Compacting, builder: EventBuilder, turn: d.ChatTurn, truncation: str
) -> AsyncGenerator[ev.Event, None]:
    """The compaction item's events; `turn` (the answer's) then reads the compacted context.

    If the summary turn fails or the consumer leaves, the run ends the item as added: whole.
    """
    item = Compaction(compacting.whole)
    for event in builder.add(item):
        yield event
    summary_turn = replace(compacting.summary, routing=turn.routing)
    text = ""
    engine = compacting.engine
    async with aclosing(checked(engine.stream(summary_turn), summary_turn.cancel)) as deltas:
        async for delta in deltas:
            if isinstance(delta, d.TextDelta):
                text += delta.text
            # Its text and reasoning are the item's progress, its usage the response's; a
            # call (it was shown no tools) and its Finish stay the summary turn's own.
            if isinstance(delta, d.TextDelta | d.ReasoningDelta | d.Usage):
                for event in builder.push(delta):
                    yield event
    summary = text.strip()
    if summary:
        compacted = [_request(), InputMessage(role="assistant", content=summary), *compacting.kept]
        item.seal(compacting.seal([stored_item(kept) for kept in compacted]))
        turn.messages = compacting.messages_of(compacted)
    for event in builder.close():
        yield event
    await _fitted(engine, turn, truncation, compacting.count)


def _threshold(body: CreateResponseBody, engine: d.Engine) -> int | None:
    """Tokens past which the request's context is compacted (None: it never is)."""
    if not body.context_management:
        return None
    entry = body.context_management[0]
    if entry.compact_threshold is not None:
        return entry.compact_threshold
    window = engine.info.context_window
    return int(window * DEFAULT_SHARE) if window else None


def _newest(items: Sequence[InputItem]) -> int:
    """Where the newest part starts: the last user message (0 when there is none)."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, InputMessage) and item.role == "user":
            return index
    return 0


def _from_a_user(messages: list[d.ChatMessage]) -> list[d.ChatMessage]:
    """A cut chat from its first user message on (with its system messages): templates
    that insist roles alternate from the user's (Mistral's, Gemma's) refuse any other."""
    first = next(i for i, m in enumerate(messages) if m.role == "user")  # the request, last
    return [m for i, m in enumerate(messages) if i >= first or m.role == "system"]


def _request() -> InputMessage:
    return InputMessage(role="user", content=SUMMARY_REQUEST)


async def _fitted(engine: d.Engine, turn: d.ChatTurn, truncation: str, count: Counter) -> None:
    """`fit`, whose refusal is the run's failure now that the response is streaming."""
    try:
        await fit(engine, turn, truncation, count)
    except APIError as exc:
        cause = exc.__cause__
        if isinstance(cause, d.ContextOverflowError | d.EngineError):
            raise cause from None
        raise
