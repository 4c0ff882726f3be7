"""Extraction in a child process with a page, a text and a time cap (#32).

Each cap is hit with a real file through the real worker (respond/files/_worker.py), and
the error is the one the vector store file's `last_error` carries.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from respond.files import ExtractionError
from respond.files._worker import ExtractLimits, extract_in_worker
from tests.support.pdfs import pdf, pdf_bomb


def run(filename: str, content: bytes, **limits: float) -> str:
    return asyncio.run(extract_in_worker(filename, content, ExtractLimits(**limits)))  # type: ignore[arg-type]


def failure(filename: str, content: bytes, **limits: float) -> ExtractionError:
    with pytest.raises(ExtractionError) as caught:
        run(filename, content, **limits)
    return caught.value


def test_text_comes_back_from_the_worker() -> None:
    assert run("a.md", b"# Glaciers\n\ncarve valleys") == "# Glaciers\n\ncarve valleys"
    assert "tail of ice" in run("c.pdf", pdf([["A comet has a tail of ice."]]))
    assert failure("p.png", b"\x89PNG").code == "unsupported_file"


def test_the_page_cap() -> None:
    error = failure("many.pdf", pdf([f"page {n}"] for n in range(5)), max_pages=3)
    assert error.code == "invalid_file"
    assert "5 pages" in error.message and "--extract-max-pages" in error.message
    assert run("many.pdf", pdf([f"page {n}"] for n in range(5)), max_pages=5)


def test_the_text_cap() -> None:
    error = failure("big.txt", b"word " * 300, max_chars=1000)
    assert error.code == "invalid_file" and "--extract-max-chars" in error.message
    pages = pdf(["x" * 80] for _ in range(40))  # over the cap by the 13th page
    assert "--extract-max-chars" in failure("big.pdf", pages, max_chars=1000).message


def test_the_time_cap_kills_the_reader_and_spares_the_server() -> None:
    """The bomb's pages each show one big content stream: seconds of pypdf per page. The
    worker is killed at the cap, and the calling process's threads keep their GIL."""
    ticks: list[float] = []
    done = threading.Event()

    def ticker() -> None:  # what a request thread of the server would see
        while not done.is_set():
            start = time.perf_counter()
            sum(range(2000))
            ticks.append(time.perf_counter() - start)
            time.sleep(0.001)

    others = set(_children())  # what earlier tests of this process left, not ours to judge
    thread = threading.Thread(target=ticker)
    thread.start()
    started = time.monotonic()
    try:
        error = failure("bomb.pdf", pdf_bomb(pages=20), timeout=1.5)
    finally:
        done.set()
        thread.join()
    assert time.monotonic() - started < 5
    assert error.code == "invalid_file"
    assert "1.5s" in error.message and "--extract-timeout" in error.message
    assert max(ticks) < 0.2, max(ticks)
    assert not set(_children()) - others, "the reader was left running"


def _children() -> list[str]:
    """Live (not zombie) children of this process."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                found.append(entry)
    return found
