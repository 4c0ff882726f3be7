"""`reasoning`: the model's reasoning text and its summary; replayed on the turn after it."""

from __future__ import annotations

from respond.engines import _base as d
from respond.protocol import events as ev
from respond.protocol.items import ReasoningItem, ReasoningText, SummaryText
from respond.protocol.requests import ReasoningInput
from respond.responses.kinds._base import Item, Kind, Replay, Status

__all__ = ["KIND", "Reasoning"]


class Reasoning(Item[ReasoningItem]):
    """One reasoning part (`content[0]`) and one summary part (`summary[0]`), each added
    when its first delta comes."""

    prefix = "rs"

    def __init__(self, *, text: bool = False, summary: bool = False) -> None:
        self.has_text = text
        self.has_summary = summary

    def added(self) -> tuple[ReasoningItem, list[ev.Event]]:
        return ReasoningItem(id=self.item_id), []

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.ReasoningDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        assert isinstance(delta, d.ReasoningDelta)
        out: list[ev.Event] = []
        if delta.summary:
            if not self.has_summary:
                self.has_summary = True
                out.append(
                    ev.ReasoningSummaryPartAdded(**self.ids(), summary_index=0, part=SummaryText())
                )
            out.append(
                ev.ReasoningSummaryTextDelta(**self.ids(), summary_index=0, delta=delta.text)
            )
            return out
        if not self.has_text:
            self.has_text = True
            out.append(ev.ContentPartAdded(**self.ids(), content_index=0, part=ReasoningText()))
        named = ev.ReasoningTextDelta if self.shared.openai_reasoning else ev.ReasoningDelta
        out.append(named(**self.ids(), content_index=0, delta=delta.text))
        return out

    def close(self, item: ReasoningItem, status: Status) -> list[ev.Event]:
        out: list[ev.Event] = []
        text = item.content[0].text if item.content else ""
        if self.shared.seal_reasoning is not None:
            item.encrypted_content = self.shared.seal_reasoning(text)
        done = ev.ReasoningTextDone if self.shared.openai_reasoning else ev.ReasoningDone
        for reasoning in item.content:
            out.append(done(**self.ids(), content_index=0, text=reasoning.text))
            out.append(ev.ContentPartDone(**self.ids(), content_index=0, part=reasoning))
        for summary in item.summary:
            out.append(
                ev.ReasoningSummaryTextDone(**self.ids(), summary_index=0, text=summary.text)
            )
            out.append(ev.ReasoningSummaryPartDone(**self.ids(), summary_index=0, part=summary))
        return out + self.done(item, status)


def _resume(item: ReasoningItem) -> Reasoning:
    return Reasoning(text=bool(item.content), summary=bool(item.summary))


def _replay(item: ReasoningInput, replay: Replay, where: str) -> None:
    parts = item.content or item.summary
    replay.reasoning = "".join(part.text for part in parts) or replay.reasoning


KIND = Kind(item_type="reasoning", resume=_resume, replays={ReasoningInput: _replay})
