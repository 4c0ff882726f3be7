"""Small real PDFs for the extraction tests, written by hand (no PDF library needed)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

__all__ = ["pdf", "pdf_bomb"]

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def pdf(pages: Iterable[Iterable[str]]) -> bytes:
    """A PDF with one page per item of `pages`, each showing its lines in Helvetica."""
    streams = []
    for lines in pages:
        text = " ".join(f"({line}) Tj T*" for line in lines)
        streams.append(f"BT /F1 12 Tf 14 TL 72 720 Td {text} ET".encode())
    return _document(streams, shared=False)


def pdf_bomb(pages: int, ops: int = 60_000) -> bytes:
    """#32's PDF bomb: a few KB on disk, `pages` pages that all show one content stream of
    `ops` text operators (about 1 MiB inflated), which costs pypdf seconds per page."""
    body = b"BT /F1 12 Tf 72 720 Td " + b"(x) Tj 1 0 Td " * ops + b"ET"
    return _document([zlib.compress(body, 9)] * pages, shared=True, deflated=True)


def _document(streams: list[bytes], *, shared: bool, deflated: bool = False) -> bytes:
    count = len(streams)
    font = 3
    first_content = 4
    first_page = first_content + (1 if shared else count)
    kids = " ".join(f"{first_page + n} 0 R" for n in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        FONT,
    ]
    contents = streams[:1] if shared else streams
    flate = b" /Filter /FlateDecode" if deflated else b""
    for stream in contents:
        objects.append(b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(stream), flate, stream))
    for n in range(count):
        content = first_content if shared else first_content + n
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
