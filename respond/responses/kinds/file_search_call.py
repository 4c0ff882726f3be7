"""`file_search_call`: a search of vector stores respond runs for the model. Added and in
progress; searching once its queries are known (the call's end); done when the run has
searched. The files found are cited by the answer that follows. It replays as the
`file_search` function call the model made and its numbered chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from respond import _model_json as model_json
from respond.engines._base import ToolCall
from respond.protocol import events as ev
from respond.protocol.items import FileSearchCallItem
from respond.protocol.requests import FileSearchCallInput
from respond.protocol.tools import FileSearchTool
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds._base import Kind, QuietCall, Replay, Status

__all__ = ["KIND", "FileSearchCall", "for_tool", "search_results_text"]


def for_tool(tool: HostedTool, approval_request_id: str | None = None) -> FileSearchCall:
    return FileSearchCall()


class FileSearchCall(QuietCall[FileSearchCallItem]):
    """Its arguments ({"queries": [...]}) are read at its end."""

    prefix = "fs"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def added(self) -> tuple[FileSearchCallItem, list[ev.Event]]:
        return FileSearchCallItem(id=self.item_id), [ev.FileSearchCallInProgress(**self.ids())]

    def close(self, item: FileSearchCallItem, status: Status) -> list[ev.Event]:
        if status != "completed":
            return self.done(item, status)
        # Its queries are known: the run searches, then the item is done (executed).
        self.queries = _queries(self.arguments)
        self.pending = True
        return [ev.FileSearchCallSearching(**self.ids())]

    def executed(self, item: FileSearchCallItem, result: CallResult) -> list[ev.Event]:
        item.queries = self.queries
        item.results = result.results if result.error is None else None
        out: list[ev.Event] = []
        if result.error is None:
            out.append(ev.FileSearchCallCompleted(**self.ids()))
        for file_id, filename in result.found:
            self.shared.cited.setdefault(file_id, filename)
        return out + self.done(item, "failed" if result.error is not None else "completed")


def _resume(item: FileSearchCallItem) -> FileSearchCall:
    return FileSearchCall()


def _queries(arguments: str) -> list[str]:
    """The queries of a file_search call's arguments ({"queries": [...]})."""
    try:
        queries = model_json.loads(arguments).get("queries")
    except (ValueError, AttributeError):
        return []
    return [q for q in queries if isinstance(q, str)] if isinstance(queries, list) else []


def _replay(item: FileSearchCallInput, replay: Replay, where: str) -> None:
    """The call as the model made it (the `file_search` function) and its result: the
    chunks, numbered, when the item kept them (`include: ["file_search_call.results"]`)."""
    arguments = json.dumps({"queries": item.queries}, ensure_ascii=False)
    replay.call(ToolCall(call_id=item.id, name="file_search", arguments=arguments))
    if item.results is None:
        text = "(The results of this search were not kept.)"
    else:
        text = search_results_text(item.results)
    replay.result(item.id, text)


def search_results_text(results: Sequence[dict[str, Any]]) -> str:
    """A file search's chunks as the model reads them: numbered, each with its file's name."""
    if not results:
        return "No results found in the files."
    return "\n\n".join(
        f"[{n}] {r.get('filename', '')}\n{r.get('text', '')}"
        for n, r in enumerate(results, start=1)
    )


def _echo(tool: FileSearchTool) -> dict[str, Any]:
    echoed: dict[str, Any] = tool.model_dump(mode="json", exclude_unset=True)
    return echoed


KIND = Kind(
    item_type="file_search_call",
    resume=_resume,
    replays={FileSearchCallInput: _replay},
    echoes={FileSearchTool: _echo},
    runs={"file_search": for_tool},
)
