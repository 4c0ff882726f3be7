"""`compaction`: the context before it, compacted inside the run (`context_management`;
responses/compacting.py writes it, responses/history.py opens it).

The item is added as the compaction starts, already carrying the context as it was (sealed
whole, as POST /v1/responses/compact seals it): a run that ends before its summary is
written (cancelled, failed, its process gone) leaves an item that restores that context
exactly, never a half-written one. Each piece of summary the engine samples is one
`response.compaction.compacting` event (OpenAI's; it carries no content). Once the summary
is written the run seals it, with the newest items kept verbatim, into the item (`seal`),
and the item is done. A stored stream that stopped inside a compaction is not resumed: its
item, as added, is already whole.

Compaction input items are opened into the items they carry before a context is replayed
(history.py), so this kind replays nothing.
"""

from __future__ import annotations

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import CompactionItem
from respond.responses.kinds._base import Item, Kind, Status

__all__ = ["KIND", "Compaction"]


class Compaction(Item[CompactionItem]):
    prefix = "cmp"

    def __init__(self, whole: str) -> None:
        self.content = whole  # the context as it was, until the summary is sealed

    def added(self) -> tuple[CompactionItem, list[ev.Event]]:
        return CompactionItem(id=self.item_id, encrypted_content=self.content), []

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.TextDelta | d.ReasoningDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        return [ev.CompactionCompacting(**self.ids())]

    def seal(self, content: str) -> None:
        """The compacted context, sealed: what the item carries when it is done."""
        self.content = content

    def close(self, item: CompactionItem, status: Status) -> list[ev.Event]:
        if status == "completed":
            item.encrypted_content = self.content
        return self.done(item, None)  # a compaction item has no status


KIND = Kind(item_type="compaction")
