"""Text out of an uploaded file: plain text, Markdown, source code, JSON, HTML and PDF.

The kind is told by the file name's extension (and a PDF by its magic bytes too). What
cannot be read fails that one file with an `ExtractionError` (its `last_error`), never
the batch it came in.

The server does not call this in its own process: respond/files/_worker.py runs this file
as a script in a child process (`main` below), under a time cap, so a file that is costly
to read (a PDF whose pages all show one huge content stream) takes no CPU or GIL from the
requests the server is answering. The page and text caps are checked here, page by page.
This file imports nothing from respond, so the child starts without the server's imports.
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
from html.parser import HTMLParser
from pathlib import PurePosixPath

__all__ = ["TEXT_EXTENSIONS", "ExtractionError", "extract_text", "main"]

MAX_PAGES = 2000  # the defaults of --extract-max-pages and --extract-max-chars
MAX_CHARS = 10_000_000
WORKER_MEMORY = 2 << 30  # bytes of address space for the child (pypdf on a big file)

# Plain text, Markdown and the source code OpenAI's file_search lists, read as UTF-8.
TEXT_EXTENSIONS = frozenset(
    {
        *(".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".tsv", ".log", ".tex"),
        *(".xml", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".sql", ".css"),
        *(".py", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".c", ".h", ".cc", ".cpp"),
        *(".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".sh", ".bash", ".swift", ".kt"),
        *(".scala", ".lua", ".pl", ".r", ".m"),
    }
)


class ExtractionError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def extract_text(
    filename: str, content: bytes, *, max_pages: int = MAX_PAGES, max_chars: int = MAX_CHARS
) -> str:
    text = _extract(filename, content, max_pages, max_chars)
    if len(text) > max_chars:
        raise _too_much(filename, max_chars)
    return text


def _too_much(filename: str, max_chars: int) -> ExtractionError:
    return ExtractionError(
        "invalid_file",
        f"'{filename}' holds more than {max_chars:,} characters of text, the most this server "
        "indexes from one file (--extract-max-chars).",
    )


def _extract(filename: str, content: bytes, max_pages: int, max_chars: int) -> str:
    suffix = PurePosixPath(filename.lower()).suffix
    if suffix == ".pdf" or content.startswith(b"%PDF-"):
        return _pdf(filename, content, max_pages, max_chars)
    if suffix in (".html", ".htm", ".xhtml"):
        return _html(_decode(content, filename))
    if suffix == ".json":
        text = _decode(content, filename)
        try:
            json.loads(text)
        except ValueError as exc:
            raise ExtractionError(
                "invalid_file", f"'{filename}' is not valid JSON: {exc}."
            ) from None
        return text
    if suffix in TEXT_EXTENSIONS or suffix == "":
        return _decode(content, filename)
    raise ExtractionError(
        "unsupported_file",
        f"Files of type '{suffix}' are not supported: plain text, Markdown, source code, "
        "JSON, HTML and PDF are.",
    )


def _decode(content: bytes, filename: str) -> str:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExtractionError("unsupported_file", f"'{filename}' is not UTF-8 text.") from None
    if "\x00" in text:  # a binary file with a text name
        raise ExtractionError("unsupported_file", f"'{filename}' is binary, not text.")
    return text


class _HTMLText(HTMLParser):
    """The text of a page, a line per block, without scripts and styles."""

    SKIP = frozenset({"script", "style", "noscript", "template", "head"})
    BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote"}
        | {"section", "article", "table", "ul", "ol"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def _html(text: str) -> str:
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _pdf(filename: str, content: bytes, max_pages: int, max_chars: int) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise ExtractionError("unsupported_file", "Encrypted PDFs are not supported.")
        if len(reader.pages) > max_pages:
            raise ExtractionError(
                "invalid_file",
                f"'{filename}' has {len(reader.pages):,} pages, more than the {max_pages:,} "
                "this server indexes from one PDF (--extract-max-pages).",
            )
        texts, size = [], 0
        for page in reader.pages:  # the text cap is checked as pages are read, not at the end
            texts.append(page.extract_text() or "")
            size += len(texts[-1]) + 2
            if size > max_chars:
                raise _too_much(filename, max_chars)
        return "\n\n".join(texts)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError("invalid_file", f"The PDF could not be read: {exc}.") from None


def main() -> None:
    """The child's side: argv is the file name and the two caps, stdin the file; stdout gets
    one JSON object, {"text": ...} or {"error": {"code", "message"}}."""
    filename, max_pages, max_chars = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.nice(10)  # behind the server's own threads when the cores are busy
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    content = sys.stdin.buffer.read()
    try:
        answer: dict[str, object] = {
            "text": extract_text(filename, content, max_pages=max_pages, max_chars=max_chars)
        }
    except ExtractionError as exc:
        answer = {"error": {"code": exc.code, "message": exc.message}}
    except MemoryError:
        answer = {"error": {"code": "invalid_file", "message": f"'{filename}' is too big to read."}}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
