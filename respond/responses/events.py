"""EventBuilder: the streaming state machine. Pure, synchronous, no I/O.

It is the single owner of sequence numbers and output indexes. Feed it engine deltas
(`push`), then end it exactly once (`finish`, `fail` or `cancel`); each call returns the
events to send, in order. Every event is applied to a ResponseFold as it is emitted, so
`builder.response` is always exactly what the events so far describe.

`EventBuilder.resume` picks up a stream that stopped without its terminal event (the
process running it died): every run, live or orphaned, ends through the same methods.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from respond._ids import new_id
from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import (
    CustomToolCallItem,
    FileSearchCallItem,
    FunctionCallItem,
    LogProb,
    McpApprovalRequestItem,
    McpCallItem,
    McpListToolsItem,
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
from respond.responses.hosted._base import CallResult, HostedTool

__all__ = ["EventBuilder"]


@dataclass
class _Open:
    """The output item currently being streamed."""

    kind: str  # "message" | "reasoning" | "function_call" | "mcp_call" | ...
    index: int
    item_id: str


_PREFIX = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "mcp_list_tools": "mcpl",
    "mcp_call": "mcp",
    "mcp_approval_request": "mcpr",
    "file_search_call": "fs",
}


class EventBuilder:
    def __init__(
        self,
        response: ResponseResource,
        *,
        seal_reasoning: Callable[[str], str] | None = None,
        custom_tools: frozenset[str] = frozenset(),
        hosted: Mapping[str, HostedTool] | None = None,
        reasoning_events: ev.ReasoningEvents = "openai",
    ) -> None:
        # OpenAI's reasoning_text.* event names, or the Open Responses reasoning.* ones.
        self._openai_reasoning = reasoning_events == "openai"
        # Calls to these names are custom tool calls (free-form input), not function calls.
        self._custom_tools = custom_tools
        self._custom_arguments = ""
        # Calls to these names are hosted (MCP) calls that the run executes: `mcp_call`
        # items, or `mcp_approval_request` items when the call needs approval first.
        self._hosted = dict(hosted or {})
        self._approval_arguments = ""
        # mcp_call / file_search_call items whose arguments are done, waiting for the run
        # to execute them.
        self.calling: dict[str, int] = {}
        # file_search: the open call's arguments, each call's queries, and the files found
        # (file id -> name), which the answer that follows cites.
        self._search_arguments = ""
        self._queries: dict[str, list[str]] = {}
        self._cited: dict[str, str] = {}
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
        builder._open = None if builder._ended else _still_open(builder.response)
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
        if isinstance(delta, d.TextDelta):
            return self._text(delta)
        if isinstance(delta, d.ReasoningDelta):
            return self._summary(delta.text) if delta.summary else self._reasoning(delta.text)
        if isinstance(delta, d.ToolCallStart) and delta.name in self._hosted:
            if self._hosted[delta.name].family == "file_search":
                return self._close_open() + self._search_call()
            return self._close_open() + self._hosted_call(self._hosted[delta.name])
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
            if open_ is not None and open_.kind == "mcp_approval_request":
                self._approval_arguments += delta.arguments  # no delta events for these
                return []
            if open_ is not None and open_.kind == "file_search_call":
                self._search_arguments += delta.arguments  # the queries, known at the end
                return []
            if open_ is not None and open_.kind == "mcp_call":
                return [
                    self._emit(
                        ev.McpCallArgumentsDelta(
                            item_id=open_.item_id, output_index=open_.index, delta=delta.arguments
                        )
                    )
                ]
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
            self._usage = delta if self._usage is None else _added(self._usage, delta)
            return []
        self._finish_reason = delta.reason
        return []

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

    def list_tools(self, item: McpListToolsItem) -> list[ev.Event]:
        """A server's `mcp_list_tools` item, listed before the run started."""
        out = self._open_item(
            "mcp_list_tools",
            lambda item_id: item.model_copy(update={"id": item_id, "tools": []}),
        )
        open_ = self._open
        assert open_ is not None
        self._open = None
        item_id, index = open_.item_id, open_.index
        out.append(self._emit(ev.McpListToolsInProgress(item_id=item_id, output_index=index)))
        ended = ev.McpListToolsFailed if item.error is not None else ev.McpListToolsCompleted
        out.append(self._emit(ended(item_id=item_id, output_index=index)))
        final = item.model_copy(update={"id": open_.item_id})
        out.append(self._emit(ev.OutputItemDone(output_index=open_.index, item=final)))
        return out

    def approved_call(self, tool: HostedTool, arguments: str, request_id: str) -> list[ev.Event]:
        """An `mcp_call` the client approved: its arguments are known, it runs next."""
        out = self._close_open() + self._hosted_call(tool, approval_request_id=request_id)
        out += self.push(d.ToolCallArgumentsDelta(arguments))
        return out + self._close_open()

    def call_done(self, item_id: str, result: CallResult) -> list[ev.Event]:
        """An executed `mcp_call`: .completed or .failed, then its output_item.done."""
        index = self.calling.pop(item_id)
        item = self.response.output[index].model_copy(deep=True)
        if isinstance(item, FileSearchCallItem):
            return self._search_done(item_id, index, item, result)
        assert isinstance(item, McpCallItem)
        item.output, item.error = result.output, result.error
        item.status = "failed" if result.error is not None else "completed"
        ended = ev.McpCallFailed if result.error is not None else ev.McpCallCompleted
        done = ended(item_id=item_id, output_index=index)
        return [self._emit(done), self._emit(ev.OutputItemDone(output_index=index, item=item))]

    def _hosted_call(
        self, tool: HostedTool, *, approval_request_id: str | None = None
    ) -> list[ev.Event]:
        if tool.needs_approval and approval_request_id is None:
            self._approval_arguments = ""
            return self._open_item(
                "mcp_approval_request",
                lambda item_id: McpApprovalRequestItem(
                    id=item_id, server_label=tool.server_label, name=tool.name
                ),
            )
        out = self._open_item(
            "mcp_call",
            lambda item_id: McpCallItem(
                id=item_id,
                server_label=tool.server_label,
                name=tool.name,
                approval_request_id=approval_request_id,
            ),
        )
        open_ = self._open
        assert open_ is not None
        out.append(
            self._emit(ev.McpCallInProgress(item_id=open_.item_id, output_index=open_.index))
        )
        return out

    def _search_call(self) -> list[ev.Event]:
        """A `file_search_call`: added and in progress; searching once its queries are known."""
        self._search_arguments = ""
        out = self._open_item("file_search_call", lambda item_id: FileSearchCallItem(id=item_id))
        open_ = self._open
        assert open_ is not None
        done = ev.FileSearchCallInProgress(item_id=open_.item_id, output_index=open_.index)
        return [*out, self._emit(done)]

    def _search_done(
        self, item_id: str, index: int, item: FileSearchCallItem, result: CallResult
    ) -> list[ev.Event]:
        item.queries = self._queries.pop(item_id, [])
        item.results = result.results if result.error is None else None
        item.status = "failed" if result.error is not None else "completed"
        out: list[ev.Event] = []
        if result.error is None:
            out.append(self._emit(ev.FileSearchCallCompleted(item_id=item_id, output_index=index)))
        for found in result.found:
            self._cited.setdefault(found[0], found[1])
        out.append(self._emit(ev.OutputItemDone(output_index=index, item=item)))
        return out

    def _close_calling(self, status: str) -> list[ev.Event]:
        """Calls that were never executed (the run ended first) end without output."""
        out: list[ev.Event] = []
        for index in list(self.calling.values()):
            item = self.response.output[index].model_copy(deep=True)
            assert isinstance(item, McpCallItem | FileSearchCallItem)
            item.status = status  # type: ignore[assignment]
            out.append(self._emit(ev.OutputItemDone(output_index=index, item=item)))
        self.calling.clear()
        return out

    def finish(self) -> list[ev.Event]:
        """Close what is open, then response.completed or response.incomplete."""
        cut = self._finish_reason == "length"
        out = self._close_open(status="incomplete" if cut else "completed")
        out += self._close_calling("incomplete")
        if cut:
            details = IncompleteDetails(reason="max_output_tokens")
            return out + self._terminal("incomplete", incomplete_details=details)
        return out + self._terminal("completed")

    def fail(self, code: str, message: str) -> list[ev.Event]:
        """Close what is open as incomplete, then exactly one response.failed."""
        out = self._close_open(status="incomplete") + self._close_calling("incomplete")
        return out + self._terminal("failed", error=ErrorInfo(code=code, message=message))

    def cancel(self) -> list[ev.Event]:
        """Close what is open as incomplete; the response ends `cancelled`.

        The Open Responses stream has no cancelled event, so the stream ends with
        response.failed whose response carries status "cancelled".
        """
        out = self._close_open(status="incomplete") + self._close_calling("incomplete")
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
        item_id = new_id(_PREFIX[kind])
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
        # A resumed stream may stop between an item's `added` and its content part's.
        if isinstance(item, MessageItem) and item.content:
            part = item.content[0]
            assert isinstance(part, OutputText)
            if self._cited:
                part.annotations = _citations(self._cited, len(part.text))
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
        elif isinstance(item, McpCallItem):
            done = ev.McpCallArgumentsDone(
                item_id=item_id, output_index=index, arguments=item.arguments
            )
            out.append(self._emit(done))
            if status == "completed":  # the run executes it, then the item is done
                self.calling[item_id] = index
                return out
        elif isinstance(item, FileSearchCallItem) and status == "completed":
            # Its queries are known: the run searches, then the item is done (call_done).
            self._queries[item_id] = _queries(self._search_arguments)
            out.append(self._emit(ev.FileSearchCallSearching(item_id=item_id, output_index=index)))
            self.calling[item_id] = index
            return out
        elif isinstance(item, McpApprovalRequestItem):
            item.arguments = self._approval_arguments
            out.append(self._emit(ev.OutputItemDone(output_index=index, item=item)))
            return out
        assert not isinstance(item, McpListToolsItem), "a listing is never streamed"
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


def _added(a: d.Usage, b: d.Usage) -> d.Usage:
    """Usage over the engine turns of one response (a hosted tool loop has several)."""
    return d.Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cached_tokens=a.cached_tokens + b.cached_tokens,
        reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
    )


def _still_open(response: ResponseResource) -> _Open | None:
    """The item a stream left open: the last one, unless it is done (a status set at done)."""
    if not response.output:
        return None
    index = len(response.output) - 1
    item = response.output[index]
    # A listing is added and done in one step (it has no status): never left open.
    done = getattr(item, "status", None) in ("completed", "incomplete", "failed")
    if done or item.type == "mcp_list_tools" or item.type not in _PREFIX:
        return None
    return _Open(kind=item.type, index=index, item_id=item.id)


def _citations(files: Mapping[str, str], index: int) -> list[dict[str, object]]:
    """A `file_citation` for each file the response's searches found, at the answer's end:
    respond cannot tell which chunks the model used, so it cites all it was given."""
    return [
        {"type": "file_citation", "file_id": file_id, "filename": filename, "index": index}
        for file_id, filename in files.items()
    ]


def _queries(arguments: str) -> list[str]:
    """The queries of a file_search call's arguments ({"queries": [...]})."""
    try:
        queries = json.loads(arguments).get("queries")
    except (ValueError, AttributeError):
        return []
    return [q for q in queries if isinstance(q, str)] if isinstance(queries, list) else []


def _logprob(lp: d.TokenLogprob) -> LogProb:
    return LogProb(
        token=lp.token,
        logprob=lp.logprob,
        bytes=list(lp.bytes),
        top_logprobs=[TopLogProb(token=t, logprob=p, bytes=list(b)) for t, p, b in lp.top],
    )
