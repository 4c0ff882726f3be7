"""Text out of an uploaded file: plain text, Markdown, source code, JSON, HTML and PDF.

The kind is told by the file name's extension (and a PDF by its magic bytes too). What
cannot be read fails that one file with an `ExtractionError` (its `last_error`), never
the batch it came in.
"""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser
from pathlib import PurePosixPath

__all__ = ["TEXT_EXTENSIONS", "ExtractionError", "extract_text"]

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


def extract_text(filename: str, content: bytes) -> str:
    suffix = PurePosixPath(filename.lower()).suffix
    if suffix == ".pdf" or content.startswith(b"%PDF-"):
        return _pdf(content)
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


def _pdf(content: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise ExtractionError("unsupported_file", "Encrypted PDFs are not supported.")
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError("invalid_file", f"The PDF could not be read: {exc}.") from None
