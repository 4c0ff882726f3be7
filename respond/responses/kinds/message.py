"""`message`: the model's text (one output_text part), and input messages as chat turns."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines import _base as d
from respond.engines._base import ChatMessage
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.items import LogProb, MessageItem, OutputText, TopLogProb
from respond.protocol.requests import InputFile, InputImage, InputMessage, RefusalIn
from respond.responses.kinds._base import Item, Kind, Replay, Status

__all__ = ["KIND", "Message", "parts_text"]


class Message(Item[MessageItem]):
    prefix = "msg"

    def added(self) -> tuple[MessageItem, list[ev.Event]]:
        part = ev.ContentPartAdded(**self.ids(), content_index=0, part=OutputText())
        return MessageItem(id=self.item_id), [part]

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.TextDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        assert isinstance(delta, d.TextDelta)
        logprobs = [_logprob(lp) for lp in delta.logprobs]
        text = ev.OutputTextDelta(
            **self.ids(), content_index=0, delta=delta.text, logprobs=logprobs
        )
        return [text]

    def close(self, item: MessageItem, status: Status) -> list[ev.Event]:
        out: list[ev.Event] = []
        # A resumed stream may stop between an item's `added` and its content part's.
        if item.content:
            part = item.content[0]
            assert isinstance(part, OutputText)
            # Each citation streams as its own annotation.added (which the fold adds to
            # the part), then the part is done with the same list.
            notes = _citations(self.shared.cited, len(part.text))
            notes += _container_citations(self.shared.written, part.text)
            notes += _url_citations(self.shared.linked, part.text)
            out += [
                ev.OutputTextAnnotationAdded(
                    **self.ids(),
                    content_index=0,
                    annotation_index=len(part.annotations) + index,
                    annotation=note,
                )
                for index, note in enumerate(notes)
            ]
            part.annotations = [*part.annotations, *notes]
            out.append(
                ev.OutputTextDone(
                    **self.ids(), content_index=0, text=part.text, logprobs=part.logprobs
                )
            )
            out.append(ev.ContentPartDone(**self.ids(), content_index=0, part=part))
        return out + self.done(item, status)


def _resume(item: MessageItem) -> Message:
    return Message()


def _citations(files: Mapping[str, str], index: int) -> list[dict[str, object]]:
    """A `file_citation` for each file the response's searches found, at the answer's end:
    respond cannot tell which chunks the model used, so it cites all it was given."""
    return [
        {"type": "file_citation", "file_id": file_id, "filename": filename, "index": index}
        for file_id, filename in files.items()
    ]


def _container_citations(
    written: Mapping[str, tuple[str, str]], text: str
) -> list[dict[str, object]]:
    """A `container_file_citation` for each file the response's code wrote: spanning the
    first place the answer names it (its path, else its name), else at the answer's end."""
    notes: list[dict[str, object]] = []
    for file_id, (container_id, path) in written.items():
        name = path.rsplit("/", 1)[-1]
        start, length = text.find(path), len(path)
        if start < 0:
            start, length = text.find(name), len(name)
        if start < 0:
            start, length = len(text), 0
        notes.append(
            {
                "type": "container_file_citation",
                "container_id": container_id,
                "file_id": file_id,
                "filename": name,
                "start_index": start,
                "end_index": start + length,
            }
        )
    return notes


def _url_citations(linked: Mapping[str, str], text: str) -> list[dict[str, object]]:
    """A `url_citation` for each page the response's web searches found that the answer
    names: spanning the first markdown link to it, else the first place its URL is written
    (a page never named is not cited: the answer may not have used it)."""
    notes: list[dict[str, object]] = []
    for url, title in linked.items():
        start, end = _named(text, url)
        if start < 0:
            continue
        notes.append(
            {
                "type": "url_citation",
                "url": url,
                "title": title,
                "start_index": start,
                "end_index": end,
            }
        )
    return sorted(notes, key=lambda note: int(str(note["start_index"])))


def _named(text: str, url: str) -> tuple[int, int]:
    """Where `text` names `url` (a trailing slash either way): (start, end), or (-1, -1)."""
    for form in dict.fromkeys((url, url.rstrip("/"))):
        link = re.search(r"\[[^\]\n]*\]\(" + re.escape(form) + r"/?\)", text)
        if link is not None:
            return link.start(), link.end()
        found = re.search(re.escape(form) + r"/?(?![\w/.-])", text)
        if found is not None:
            return found.start(), found.end()
    return -1, -1


def _logprob(lp: d.TokenLogprob) -> LogProb:
    return LogProb(
        token=lp.token,
        logprob=lp.logprob,
        bytes=list(lp.bytes),
        top_logprobs=[TopLogProb(token=t, logprob=p, bytes=list(b)) for t, p, b in lp.top],
    )


# ------------------------------------------------------------ replay


def _replay(item: InputMessage, replay: Replay, where: str) -> None:
    replay.moved_on()
    images: tuple[str, ...] = ()
    if isinstance(item.content, str):
        text = item.content
    else:
        text, images = parts_text(item.content, replay.vision, f"{where}.content")
    if item.role == "assistant":
        replay.messages.append(
            ChatMessage(role="assistant", content=text, reasoning=replay.reasoning)
        )
        replay.reasoning = None
    else:
        replay.messages.append(ChatMessage(role=item.role, content=text, images=images))


def parts_text(parts: Sequence[Any], vision: bool, where: str) -> tuple[str, tuple[str, ...]]:
    """The parts' text joined, and the URLs of their images (for vision models)."""
    texts: list[str] = []
    images: list[str] = []
    for index, part in enumerate(parts):
        if isinstance(part, InputImage) and not vision:
            raise APIError(
                400,
                "This model has no vision support: it cannot read input_image content. "
                "Send text only, or use a vision-capable model.",
                param=f"{where}[{index}]",
                code="unsupported_content",
            )
        if isinstance(part, InputImage):
            # One by file_id is given by data URL before the engine's turn is replayed
            # (responses/images.py); the check of the request's input sees it unread.
            if part.image_url:
                images.append(part.image_url)
            elif not part.file_id:
                raise APIError(
                    400,
                    "input_image needs an image_url (a data: or http(s) URL) or a file_id.",
                    param=f"{where}[{index}].image_url",
                    code="missing_required_parameter",
                )
        if isinstance(part, InputFile):
            raise APIError(
                400,
                "This model cannot read input_file content; send the file's text as input_text.",
                param=f"{where}[{index}]",
                code="unsupported_content",
            )
        if isinstance(part, RefusalIn):
            texts.append(part.refusal)
        elif hasattr(part, "text"):
            texts.append(part.text)
    return "\n".join(texts), tuple(images)


KIND = Kind(item_type="message", resume=_resume, replays={InputMessage: _replay})
