"""EventBuilder: the streaming state machine. Pure, synchronous, no I/O.

It is the single owner of sequence numbers and output indexes. Feed it engine deltas
(`push`), then end it exactly once (`finish`, `fail` or `cancel`); each call returns the
events to send, in order. Every event is applied to a ResponseFold as it is emitted, so
`builder.response` is always exactly what the events so far describe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from respond._ids import new_id
from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import (
    CustomToolCallItem,
    FunctionCallItem,
    LogProb,
    MessageItem,
    OutputText,
    ReasoningItem,
    ReasoningText,
    SummaryText,
    TopLogProb,
)
from respond.protocol.resource import (
    ErrorInfo,
    IncompleteDetails,
    InputTokensDetails,
    OutputTokensDetails,
    ResponseResource,
    ResponseUsage,
)
from respond.responses.fold import ResponseFold

__all__ = ["EventBuilder"]


@dataclass
class _Open:
    """The output item currently being streamed."""

    kind: str  # "message" | "reasoning" | "function_call"
    index: int
    item_id: str


class EventBuilder:
    def __init__(
        self,
        response: ResponseResource,
        *,
        seal_reasoning: Callable[[str], str] | None = None,
        custom_tools: frozenset[str] = frozenset(),
        reasoning_events: ev.ReasoningEvents = "openai",
    ) -> None:
        # OpenAI's reasoning_text.* event names, or the Open Responses reasoning.* ones.
        self._openai_reasoning = reasoning_events == "openai"
        # Calls to these names are custom tool calls (free-form input), not function calls.
        self._custom_tools = custom_tools
        self._custom_arguments = ""
        # Set when the client asked for reasoning.encrypted_content: each reasoning item
        # is done with its text sealed into encrypted_content.
        self._seal_reasoning = seal_reasoning
        self._fold = ResponseFold(response.model_copy(deep=True))
        self._next_seq = 0
        self._open: _Open | None = None
        self._usage: d.Usage | None = None
        self._finish_reason: str | None = None
        self._ended = False
        self.events: list[ev.Event] = []

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
        if isinstance(delta, d.TextDelta):
            return self._text(delta)
        if isinstance(delta, d.ReasoningDelta):
            return self._summary(delta.text) if delta.summary else self._reasoning(delta.text)
        if isinstance(delta, d.ToolCallStart) and delta.name in self._custom_tools:
            self._custom_arguments = ""
            out = self._close_open()
            out += self._open_item(
                "custom_tool_call",
                lambda item_id: CustomToolCallItem(
                    id=item_id, call_id=delta.call_id, name=delta.name
                ),
            )
            return out
        if isinstance(delta, d.ToolCallStart):
            out = self._close_open()
            out += self._open_item(
                "function_call",
                lambda item_id: FunctionCallItem(
                    id=item_id, call_id=delta.call_id, name=delta.name
                ),
            )
            return out
        if isinstance(delta, d.ToolCallArgumentsDelta):
            open_ = self._open
            if open_ is not None and open_.kind == "custom_tool_call":
                # The engine writes {"input": "..."}; the item's input is that string,
                # known once the JSON closes (at ToolCallEnd).
                self._custom_arguments += delta.arguments
                return []
            assert open_ is not None and open_.kind == "function_call", "arguments outside a call"
            return [
                self._emit(
                    ev.FunctionCallArgumentsDelta(
                        item_id=open_.item_id, output_index=open_.index, delta=delta.arguments
                    )
                )
            ]
        if isinstance(delta, d.ToolCallEnd):
            return self._custom_input() + self._close_open()
        if isinstance(delta, d.Usage):
            self._usage = delta
            return []
        self._finish_reason = delta.reason
        return []

    def finish(self) -> list[ev.Event]:
        """Close what is open, then response.completed or response.incomplete."""
        cut = self._finish_reason == "length"
        out = self._close_open(status="incomplete" if cut else "completed")
        if cut:
            details = IncompleteDetails(reason="max_output_tokens")
            return out + self._terminal("incomplete", incomplete_details=details)
        return out + self._terminal("completed")

    def fail(self, code: str, message: str) -> list[ev.Event]:
        """Close what is open as incomplete, then exactly one response.failed."""
        out = self._close_open(status="incomplete")
        return out + self._terminal("failed", error=ErrorInfo(code=code, message=message))

    def cancel(self) -> list[ev.Event]:
        """Close what is open as incomplete; the response ends `cancelled`.

        The Open Responses stream has no cancelled event, so the stream ends with
        response.failed whose response carries status "cancelled".
        """
        out = self._close_open(status="incomplete")
        return out + self._terminal("cancelled")

    # ------------------------------------------------------------ items

    def _text(self, delta: d.TextDelta) -> list[ev.Event]:
        out: list[ev.Event] = []
        if self._open is None or self._open.kind != "message":
            out += self._close_open()
            out += self._open_item("message", lambda item_id: MessageItem(id=item_id))
            out.append(self._part_added(OutputText()))
        open_ = self._open
        assert open_ is not None
        out.append(
            self._emit(
                ev.OutputTextDelta(
                    item_id=open_.item_id,
                    output_index=open_.index,
                    content_index=0,
                    delta=delta.text,
                    logprobs=[_logprob(lp) for lp in delta.logprobs],
                )
            )
        )
        return out

    def _open_reasoning(self) -> tuple[list[ev.Event], ReasoningItem]:
        """The open reasoning item (opened now if another item, or none, is open)."""
        out: list[ev.Event] = []
        if self._open is None or self._open.kind != "reasoning":
            out += self._close_open()
            out += self._open_item("reasoning", lambda item_id: ReasoningItem(id=item_id))
        assert self._open is not None
        item = self.response.output[self._open.index]
        assert isinstance(item, ReasoningItem)
        return out, item

    def _reasoning(self, text: str) -> list[ev.Event]:
        out, item = self._open_reasoning()
        if not item.content:
            out.append(self._part_added(ReasoningText()))
        open_ = self._open
        assert open_ is not None
        out.append(
            self._emit(
                (ev.ReasoningTextDelta if self._openai_reasoning else ev.ReasoningDelta)(
                    item_id=open_.item_id, output_index=open_.index, content_index=0, delta=text
                )
            )
        )
        return out

    def _summary(self, text: str) -> list[ev.Event]:
        """A summary of the reasoning (one summary part per item)."""
        out, item = self._open_reasoning()
        open_ = self._open
        assert open_ is not None
        item_id, index = open_.item_id, open_.index
        if not item.summary:
            added = ev.ReasoningSummaryPartAdded(
                item_id=item_id, output_index=index, summary_index=0, part=SummaryText()
            )
            out.append(self._emit(added))
        delta = ev.ReasoningSummaryTextDelta(
            item_id=item_id, output_index=index, summary_index=0, delta=text
        )
        out.append(self._emit(delta))
        return out

    def _custom_input(self) -> list[ev.Event]:
        open_ = self._open
        if open_ is None or open_.kind != "custom_tool_call":
            return []
        try:
            value = json.loads(self._custom_arguments).get("input", "")
        except (ValueError, AttributeError):
            value = ""  # cut short by the token limit: no complete input
        return [
            self._emit(
                ev.CustomToolCallInputDelta(
                    item_id=open_.item_id, output_index=open_.index, delta=str(value)
                )
            )
        ]

    def _open_item(self, kind: str, make: object) -> list[ev.Event]:
        prefix = {
            "message": "msg",
            "reasoning": "rs",
            "function_call": "fc",
            "custom_tool_call": "ctc",
        }[kind]
        item_id = new_id(prefix)
        item = make(item_id)  # type: ignore[operator]
        index = len(self.response.output)
        self._open = _Open(kind=kind, index=index, item_id=item_id)
        return [self._emit(ev.OutputItemAdded(output_index=index, item=item))]

    def _part_added(self, part: OutputText | ReasoningText) -> ev.Event:
        open_ = self._open
        assert open_ is not None
        return self._emit(
            ev.ContentPartAdded(
                item_id=open_.item_id, output_index=open_.index, content_index=0, part=part
            )
        )

    def _close_open(self, status: str = "completed") -> list[ev.Event]:
        open_ = self._open
        if open_ is None:
            return []
        self._open = None
        item = self.response.output[open_.index].model_copy(deep=True)
        item_id, index = open_.item_id, open_.index
        out: list[ev.Event] = []
        if isinstance(item, MessageItem):
            part = item.content[0]
            assert isinstance(part, OutputText)
            out.append(
                self._emit(
                    ev.OutputTextDone(
                        item_id=item_id,
                        output_index=index,
                        content_index=0,
                        text=part.text,
                        logprobs=part.logprobs,
                    )
                )
            )
            out.append(
                self._emit(
                    ev.ContentPartDone(
                        item_id=item_id, output_index=index, content_index=0, part=part
                    )
                )
            )
        elif isinstance(item, ReasoningItem):
            out += self._reasoning_done(item, index)
        elif isinstance(item, CustomToolCallItem):
            out.append(
                self._emit(
                    ev.CustomToolCallInputDone(
                        item_id=item_id, output_index=index, input=item.input
                    )
                )
            )
        elif isinstance(item, FunctionCallItem):
            out.append(
                self._emit(
                    ev.FunctionCallArgumentsDone(
                        item_id=item_id, output_index=index, arguments=item.arguments
                    )
                )
            )
        item.status = status  # type: ignore[assignment]
        out.append(self._emit(ev.OutputItemDone(output_index=open_.index, item=item)))
        return out

    def _reasoning_done(self, item: ReasoningItem, index: int) -> list[ev.Event]:
        out: list[ev.Event] = []
        text = item.content[0].text if item.content else ""
        if self._seal_reasoning is not None:
            item.encrypted_content = self._seal_reasoning(text)
        done = ev.ReasoningTextDone if self._openai_reasoning else ev.ReasoningDone
        for reasoning in item.content:
            out.append(
                self._emit(
                    done(item_id=item.id, output_index=index, content_index=0, text=reasoning.text)
                )
            )
            out.append(
                self._emit(
                    ev.ContentPartDone(
                        item_id=item.id, output_index=index, content_index=0, part=reasoning
                    )
                )
            )
        for summary in item.summary:
            out.append(
                self._emit(
                    ev.ReasoningSummaryTextDone(
                        item_id=item.id, output_index=index, summary_index=0, text=summary.text
                    )
                )
            )
            out.append(
                self._emit(
                    ev.ReasoningSummaryPartDone(
                        item_id=item.id, output_index=index, summary_index=0, part=summary
                    )
                )
            )
        return out

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


def _logprob(lp: d.TokenLogprob) -> LogProb:
    return LogProb(
        token=lp.token,
        logprob=lp.logprob,
        bytes=list(lp.bytes),
        top_logprobs=[TopLogProb(token=t, logprob=p, bytes=list(b)) for t, p, b in lp.top],
    )
