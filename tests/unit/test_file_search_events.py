"""The EventBuilder's file_search_call lifecycle and citations, without a server or a model."""

from __future__ import annotations

import json

from respond.engines import _base as d
from respond.protocol.items import FileSearchCallItem, MessageItem, OutputText
from respond.protocol.resource import ResponseResource
from respond.responses.events import EventBuilder
from respond.responses.fold import fold_events
from respond.responses.hosted import CallResult, HostedTool
from respond.responses.kinds import Kinds, calls_for
from tests.support.schema import validate_event


class _Unused:
    async def call(self, name: str, arguments: str) -> CallResult:
        raise AssertionError("the builder never runs a call")


SEARCH = HostedTool(
    visible="file_search",
    server_label="file_search",
    name="file_search",
    description=None,
    parameters={},
    needs_approval=False,
    executor=_Unused(),
    family="file_search",
)
RESULTS = [{"file_id": "file_1", "filename": "a.md", "score": 0.5, "text": "t", "attributes": {}}]


def builder() -> EventBuilder:
    response = ResponseResource(id="resp_1", created_at=1, status="in_progress", model="m")
    return EventBuilder(response, kinds=Kinds(calls_for(hosted={"file_search": SEARCH})))


def test_a_search_call_then_an_answer_that_cites_the_files() -> None:
    b = builder()
    events = b.start()
    events += b.push(d.ToolCallStart(call_id="call_1", name="file_search"))
    events += b.push(d.ToolCallArgumentsDelta('{"queries": ['))
    events += b.push(d.ToolCallArgumentsDelta('"herons"]}'))
    events += b.push(d.ToolCallEnd())
    (item_id,) = b.calling  # waiting for the run to search
    found = (("file_1", "a.md"), ("file_2", "b.md"))
    events += b.call_done(item_id, CallResult(output="...", results=RESULTS, found=found))
    events += b.push(d.TextDelta("Herons hunt at dawn."))
    events += b.finish()
    types = [e.type for e in events]
    assert types[2:7] == [
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
    ]
    for event in events:
        validate_event(json.loads(event.model_dump_json()))
    final = b.response
    assert fold_events(events) == final
    search, answer = final.output
    assert isinstance(search, FileSearchCallItem) and isinstance(answer, MessageItem)
    assert search.status == "completed" and search.queries == ["herons"]
    assert search.results == RESULTS
    part = answer.content[0]
    assert isinstance(part, OutputText)
    assert part.annotations == [
        {"type": "file_citation", "file_id": "file_1", "filename": "a.md", "index": 20},
        {"type": "file_citation", "file_id": "file_2", "filename": "b.md", "index": 20},
    ]


def test_a_failed_search_has_no_completed_event_and_an_unrun_one_ends_incomplete() -> None:
    b = builder()
    events = b.start() + b.push(d.ToolCallStart(call_id="c", name="file_search"))
    events += b.push(d.ToolCallArgumentsDelta('{"queries": []}')) + b.push(d.ToolCallEnd())
    (item_id,) = b.calling
    error = {"type": "invalid_arguments", "message": "no queries"}
    events += b.call_done(item_id, CallResult(error=error))
    assert "response.file_search_call.completed" not in [e.type for e in events]
    assert b.response.output[0].status == "failed"  # type: ignore[union-attr]

    b = builder()
    events = b.start() + b.push(d.ToolCallStart(call_id="c", name="file_search"))
    events += b.push(d.ToolCallArgumentsDelta('{"queries": ["x"]}')) + b.push(d.ToolCallEnd())
    events += b.fail("server_error", "stopped")  # the run ended before searching
    item = b.response.output[0]
    assert isinstance(item, FileSearchCallItem) and item.status == "incomplete"
    assert fold_events(events) == b.response
