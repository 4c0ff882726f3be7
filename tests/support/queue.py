"""Watching background runs go through the queue: how many ran at once, and that each ran
exactly once."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class Watched:
    most_at_once: int  # the most runs seen in progress together (never over-counted)
    waited: bool  # some run was seen queued while `most_at_once` others were in progress
    final: dict[str, dict[str, Any]]  # each run's response once it ended


def _statuses(base_url: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    return {i: httpx.get(f"{base_url}/responses/{i}", timeout=60).json() for i in ids}


def watch(base_url: str, ids: list[str], timeout: float = 600) -> Watched:
    """Poll every run until all have ended.

    A status only moves forward (queued, in_progress, then an end): a run seen in progress
    in two sweeps in a row was in progress all the time between them, so the runs seen so
    were all in progress together. Counting only those never counts more than ran at once.
    """
    deadline = time.monotonic() + timeout
    most, waited = 0, False
    previous = _statuses(base_url, ids)
    while True:
        current = _statuses(base_url, ids)
        both = [i for i in ids if previous[i]["status"] == current[i]["status"] == "in_progress"]
        most = max(most, len(both))
        queued = any(body["status"] == "queued" for body in current.values())
        waited = waited or (queued and len(both) == most and most > 0)
        if all(body["status"] not in ("queued", "in_progress") for body in current.values()):
            return Watched(most, waited, current)
        assert time.monotonic() < deadline, f"runs still going: {current}"
        previous = current
        time.sleep(0.05)


def assert_ran_once(events: list[dict[str, Any]]) -> None:
    """One stream, started once: one response.created, queued and in_progress, one end,
    sequence numbers without a gap or a repeat."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = Counter(e["type"] for e in events)
    assert types["response.created"] == types["response.queued"] == 1, types
    assert types["response.in_progress"] == 1, types
    assert sum(types[t] for t in TERMINAL) == 1 and events[-1]["type"] in TERMINAL, types
