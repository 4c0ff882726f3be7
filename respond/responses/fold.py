"""Rebuild a response from its events: the one place that defines what a stream means.

The EventBuilder applies every event it emits to a ResponseFold, so the final response,
the stored record and a replayed stream are the same data by construction. Tests feed
parsed SSE through `fold_events` and compare with GET /v1/responses/{id}.
"""

from __future__ import annotations

from collections.abc import Iterable

from respond.protocol import events as ev
from respond.protocol.items import (
    CodeInterpreterCallItem,
    CustomToolCallItem,
    FunctionCallItem,
    LogProb,
    McpCallItem,
    MessageItem,
    OutputText,
    ReasoningItem,
    ReasoningText,
)
from respond.protocol.resource import ResponseResource

__all__ = ["ResponseFold", "fold_events"]


class ResponseFold:
    def __init__(self, response: ResponseResource | None = None) -> None:
        self.response = response

    def apply(self, event: ev.Event) -> None:
        if isinstance(
            event,
            ev.ResponseCreated
            | ev.ResponseQueued
            | ev.ResponseInProgress
            | ev.ResponseCompleted
            | ev.ResponseIncomplete
            | ev.ResponseFailed,
        ):
            self.response = event.response.model_copy(deep=True)
            return
        if isinstance(event, ev.ErrorEvent):
            return
        response = self._require()
        if isinstance(event, ev.OutputItemAdded):
            assert event.output_index == len(response.output), "output_index out of order"
            response.output.append(event.item.model_copy(deep=True))
        elif isinstance(event, ev.OutputItemDone):
            response.output[event.output_index] = event.item.model_copy(deep=True)
        elif isinstance(event, ev.ContentPartAdded):
            item = response.output[event.output_index]
            assert isinstance(item, MessageItem | ReasoningItem)
            part = event.part.model_copy(deep=True)
            item.content.append(part)  # type: ignore[arg-type]
        elif isinstance(event, ev.ContentPartDone):
            item = response.output[event.output_index]
            assert isinstance(item, MessageItem | ReasoningItem)
            item.content[event.content_index] = event.part.model_copy(deep=True)  # type: ignore[assignment]
        elif isinstance(event, ev.OutputTextDelta):
            part = self._text_part(event.output_index, event.content_index)
            part.text += event.delta
            part.logprobs.extend(lp.model_copy() for lp in event.logprobs)
        elif isinstance(event, ev.OutputTextDone):
            part = self._text_part(event.output_index, event.content_index)
            part.text = event.text
            part.logprobs = [LogProb.model_validate(lp.model_dump()) for lp in event.logprobs]
        elif isinstance(event, ev.OutputTextAnnotationAdded):
            part = self._text_part(event.output_index, event.content_index)
            assert event.annotation_index == len(part.annotations), "annotation out of order"
            part.annotations.append(dict(event.annotation))
        elif isinstance(
            event,
            ev.ReasoningDelta | ev.ReasoningDone | ev.ReasoningTextDelta | ev.ReasoningTextDone,
        ):
            item = response.output[event.output_index]
            assert isinstance(item, ReasoningItem)
            reasoning = item.content[event.content_index]
            assert isinstance(reasoning, ReasoningText)
            if isinstance(event, ev.ReasoningDelta | ev.ReasoningTextDelta):
                reasoning.text += event.delta
            else:
                reasoning.text = event.text
        elif isinstance(event, ev.ReasoningSummaryPartAdded | ev.ReasoningSummaryPartDone):
            item = response.output[event.output_index]
            assert isinstance(item, ReasoningItem)
            summary_part = event.part.model_copy(deep=True)
            if isinstance(event, ev.ReasoningSummaryPartAdded):
                assert event.summary_index == len(item.summary), "summary_index out of order"
                item.summary.append(summary_part)
            else:
                item.summary[event.summary_index] = summary_part
        elif isinstance(event, ev.ReasoningSummaryTextDelta | ev.ReasoningSummaryTextDone):
            item = response.output[event.output_index]
            assert isinstance(item, ReasoningItem)
            summary = item.summary[event.summary_index]
            if isinstance(event, ev.ReasoningSummaryTextDelta):
                summary.text += event.delta
            else:
                summary.text = event.text
        elif isinstance(event, ev.CustomToolCallInputDelta | ev.CustomToolCallInputDone):
            custom = response.output[event.output_index]
            assert isinstance(custom, CustomToolCallItem)
            if isinstance(event, ev.CustomToolCallInputDelta):
                custom.input += event.delta
            else:
                custom.input = event.input
        elif isinstance(event, ev.FunctionCallArgumentsDelta | ev.FunctionCallArgumentsDone):
            call = response.output[event.output_index]
            assert isinstance(call, FunctionCallItem)
            if isinstance(event, ev.FunctionCallArgumentsDelta):
                call.arguments += event.delta
            else:
                call.arguments = event.arguments
        elif isinstance(event, ev.McpCallArgumentsDelta | ev.McpCallArgumentsDone):
            mcp_call = response.output[event.output_index]
            assert isinstance(mcp_call, McpCallItem)
            if isinstance(event, ev.McpCallArgumentsDelta):
                mcp_call.arguments += event.delta
            else:
                mcp_call.arguments = event.arguments

        elif isinstance(event, ev.CodeInterpreterCallCodeDelta | ev.CodeInterpreterCallCodeDone):
            code_call = response.output[event.output_index]
            assert isinstance(code_call, CodeInterpreterCallItem)
            if isinstance(event, ev.CodeInterpreterCallCodeDelta):
                code_call.code = (code_call.code or "") + event.delta
            else:
                code_call.code = event.code

    def _require(self) -> ResponseResource:
        assert self.response is not None, "the first event must carry the response"
        return self.response

    def _text_part(self, output_index: int, content_index: int) -> OutputText:
        item = self._require().output[output_index]
        assert isinstance(item, MessageItem)
        part = item.content[content_index]
        assert isinstance(part, OutputText)
        return part


def fold_events(events: Iterable[ev.Event]) -> ResponseResource:
    fold = ResponseFold()
    for event in events:
        fold.apply(event)
    return fold._require()
