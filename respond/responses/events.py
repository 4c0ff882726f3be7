"""EventBuilder: the streaming state machine. Pure, synchronous, no I/O.

It is the single owner of sequence numbers and output indexes. Feed it engine deltas
(`push`), then end it exactly once (`finish`, `fail` or `cancel`); each call returns the
events to send, in order. Every event is applied to a ResponseFold as it is emitted, so
`builder.response` is always exactly what the events so far describe.

What an item's events are is its kind's (responses/kinds/): the builder asks the run's
`Kinds` which item a delta opens, feeds the open item the deltas it takes, and numbers
and folds what the item returns. It knows no kind by name.

`EventBuilder.resume` picks up a stream that stopped without its terminal event (the
process running it died): every run, live or orphaned, ends through the same methods.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from respond._ids import new_id
from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.resource import (
    ErrorInfo,
    IncompleteDetails,
    InputTokensDetails,
    OutputTokensDetails,
    ResponseResource,
    ResponseUsage,
)
from respond.responses.fold import ResponseFold
from respond.responses.hosted_call import CallResult
from respond.responses.kinds import Item, Kinds, Status

__all__ = ["EventBuilder"]


class EventBuilder:
    def __init__(self, response: ResponseResource, *, kinds: Kinds | None = None) -> None:
        self._kinds = kinds or Kinds()
        self._fold = ResponseFold(response.model_copy(deep=True))
        self._next_seq = 0
        self._open: Item[Any] | None = None
        # Closed calls waiting for the run to execute them (hosted tools), by item id.
        self.calling: dict[str, Item[Any]] = {}
        self._usage: d.Usage | None = None
        self._finish_reason: str | None = None
        # The open call ended with generation: it is closed once the Finish says why.
        self._ending = False
        self._ended = False
        self.events: list[ev.Event] = []

    @classmethod
    def resume(cls, response: ResponseResource, events: Sequence[ev.Event]) -> EventBuilder:
        """A builder that continues the stream `events` (as stored, in order) of `response`.

        The events are folded, the next sequence number and the open item restored, so the
        stream can be ended with `fail()` exactly as a live run ends. What only the live
        builder knew (the engine's usage, a custom call's unparsed arguments, the sealing
        of reasoning) is not in the events and so stays unknown.
        """
        builder = cls(response)
        for event in events:
            builder._fold.apply(event)
        builder.events = list(events)
        builder._next_seq = events[-1].sequence_number + 1 if events else 0
        builder._ended = any(isinstance(event, ev.TERMINAL_EVENTS) for event in events)
        output = builder.response.output
        if not builder._ended and output:
            item = builder._kinds.resumed(output[-1])
            if item is not None:
                item.bind(builder._kinds.shared, output[-1].id, len(output) - 1)
            builder._open = item
        return builder

    @property
    def response(self) -> ResponseResource:
        response = self._fold.response
        assert response is not None
        return response

    @property
    def ended(self) -> bool:
        return self._ended

    # ------------------------------------------------------------ lifecycle

    def start(self) -> list[ev.Event]:
        """response.created then response.in_progress (or queued, for a background run)."""
        snapshot = self.response.model_copy(deep=True)
        first = self._emit(ev.ResponseCreated(response=snapshot))
        if snapshot.status == "queued":
            return [first, self._emit(ev.ResponseQueued(response=snapshot.model_copy(deep=True)))]
        return [first, *self._status("in_progress")]

    def begin(self) -> list[ev.Event]:
        """A queued (background) run starts working: response.in_progress."""
        return self._status("in_progress")

    def push(self, delta: d.Delta) -> list[ev.Event]:
        assert not self._ended, "push after the terminal event"
        if isinstance(delta, d.Usage):
            self._usage = delta if self._usage is None else _added(self._usage, delta)
            return []
        if isinstance(delta, d.Finish):
            self._finish_reason = delta.reason
            return self._end_call(cut=delta.reason == "length") if self._ending else []
        open_ = self._open
        if self._ending:  # more came after all: the call's end was its own
            return self._end_call(cut=False) + self.push(delta)
        if isinstance(delta, d.ToolCallEnd):
            if open_ is None:
                return []
            if delta.at_end:
                self._ending = True
                return []
            return self._end_call(cut=False)
        if open_ is not None and open_.takes(delta):
            return self._emit_all(open_.push(delta))
        item = self._kinds.opening(delta)
        return self.add(item) + self._emit_all(item.push(delta))

    def _end_call(self, cut: bool) -> list[ev.Event]:
        """Close the open call. One cut by the token limit is `incomplete`, never handed
        over as whole; a late kind's cut call is left out altogether."""
        open_ = self._open
        assert open_ is not None
        self._ending = False
        if cut:
            return self.close(status="incomplete")
        out = self._added(open_) if open_.late else []
        return out + self._emit_all(open_.end()) + self.close()

    def add(self, item: Item[Any]) -> list[ev.Event]:
        """Close the open item, then open `item` (output_item.added and what follows)."""
        out = self.close()
        item.bind(self._kinds.shared, new_id(item.prefix), len(self.response.output))
        self._open = item
        return out if item.late else out + self._added(item)

    def _added(self, item: Item[Any]) -> list[ev.Event]:
        added, following = item.added()
        out = [self._emit(ev.OutputItemAdded(output_index=item.index, item=added))]
        return out + self._emit_all(following)

    def close(self, status: Status = "completed") -> list[ev.Event]:
        """Close the open item (if any): its done events, unless it waits to be executed."""
        open_ = self._open
        if open_ is None:
            return []
        self._open = None
        if open_.index == len(self.response.output):
            return []  # a late item whose call was cut short: it never was
        item = self.response.output[open_.index].model_copy(deep=True)
        out = self._emit_all(open_.close(item, status))
        if open_.pending:
            self.calling[open_.item_id] = open_
        return out

    # ------------------------------------------------------------ hosted tools

    @property
    def cut(self) -> bool:
        """The last engine turn was cut by the token limit."""
        return self._finish_reason == "length"

    @property
    def output_tokens(self) -> int:
        return self._usage.output_tokens if self._usage else 0

    def limit_reached(self) -> None:
        """max_output_tokens is spent across the loop's turns: the response is incomplete."""
        self._finish_reason = "length"

    def call_done(self, item_id: str, result: CallResult) -> list[ev.Event]:
        """A call the run executed (one of `calling`): its done events."""
        call = self.calling.pop(item_id)
        item = self.response.output[call.index].model_copy(deep=True)
        out = self._emit_all(call.executed(item, result))
        follows = call.follows(result)
        return out if follows is None else out + self.add(follows) + self.close()

    def _close_calling(self, status: Status) -> list[ev.Event]:
        """Calls that were never executed (the run ended first) end without output."""
        out: list[ev.Event] = []
        for call in self.calling.values():
            item = self.response.output[call.index].model_copy(deep=True)
            out += self._emit_all(call.unfinished(item, status))
        self.calling.clear()
        return out

    def finish(self) -> list[ev.Event]:
        """Close what is open, then response.completed or response.incomplete."""
        cut = self._finish_reason == "length"
        out = self.close(status="incomplete" if cut else "completed")
        out += self._close_calling("incomplete")
        if cut:
            details = IncompleteDetails(reason="max_output_tokens")
            return out + self._terminal("incomplete", incomplete_details=details)
        return out + self._terminal("completed")

    def fail(self, code: str, message: str) -> list[ev.Event]:
        """Close what is open as incomplete, then exactly one response.failed."""
        out = self.close(status="incomplete") + self._close_calling("incomplete")
        return out + self._terminal("failed", error=ErrorInfo(code=code, message=message))

    def cancel(self) -> list[ev.Event]:
        """Close what is open as incomplete; the response ends `cancelled`.

        The Open Responses stream has no cancelled event, so the stream ends with
        response.failed whose response carries status "cancelled".
        """
        out = self.close(status="incomplete") + self._close_calling("incomplete")
        return out + self._terminal("cancelled")

    # ------------------------------------------------------------ response-level

    def _status(self, status: str) -> list[ev.Event]:
        snapshot = self.response.model_copy(deep=True)
        snapshot.status = status  # type: ignore[assignment]
        return [self._emit(ev.ResponseInProgress(response=snapshot))]

    def _terminal(
        self,
        status: str,
        *,
        error: ErrorInfo | None = None,
        incomplete_details: IncompleteDetails | None = None,
    ) -> list[ev.Event]:
        assert not self._ended, "a response ends exactly once"
        self._ended = True
        snapshot = self.response.model_copy(deep=True)
        snapshot.status = status  # type: ignore[assignment]
        snapshot.completed_at = int(time.time()) if status == "completed" else None
        snapshot.error = error
        snapshot.incomplete_details = incomplete_details
        snapshot.usage = self._usage_resource()
        kind = {
            "completed": ev.ResponseCompleted,
            "incomplete": ev.ResponseIncomplete,
        }.get(status, ev.ResponseFailed)
        return [self._emit(kind(response=snapshot))]

    def _usage_resource(self) -> ResponseUsage | None:
        usage = self._usage
        if usage is None:
            return None
        return ResponseUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning_tokens),
        )

    def _emit(self, event: ev.Event) -> ev.Event:
        event.sequence_number = self._next_seq
        self._next_seq += 1
        self._fold.apply(event)
        self.events.append(event)
        return event

    def _emit_all(self, events: Iterable[ev.Event]) -> list[ev.Event]:
        return [self._emit(event) for event in events]


def _added(a: d.Usage, b: d.Usage) -> d.Usage:
    """Usage over the engine turns of one response (a hosted tool loop has several)."""
    return d.Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cached_tokens=a.cached_tokens + b.cached_tokens,
        reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
    )
