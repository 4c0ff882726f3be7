"""Stream resume against a real SQLite store: replay, then follow until the terminal event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from respond.responses.replay import follow
from respond.store.sqlite import SQLiteStore


def response(status: str) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": status, "output": []}


def event(seq: int, kind: str = "response.in_progress") -> dict[str, Any]:
    return {"type": kind, "sequence_number": seq, "response": response("in_progress")}


class EndsRightAfterARead(SQLiteStore):
    """A store where the run ends just after a follower found no new events (the race)."""

    pending_end = False

    async def events_after(
        self, tenant: str | None, response_id: str, after: int
    ) -> list[dict[str, Any]] | None:
        found = await super().events_after(tenant, response_id, after)
        if self.pending_end and found == []:
            self.pending_end = False
            await self.append_events(
                tenant, response_id, [event(3, "response.completed")], response("completed")
            )
        return found


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EndsRightAfterARead]:
    db = EndsRightAfterARead(tmp_path / "s.sqlite3", ttl_seconds=60)
    await db.open()
    await db.save_response(None, response("in_progress"), [], [event(0), event(1), event(2)])
    yield db
    await db.close()


async def collect(events: AsyncIterator[dict[str, Any]]) -> list[int]:
    return [e["sequence_number"] async for e in events]


async def test_replay_of_a_finished_response_ends(store: EndsRightAfterARead) -> None:
    await store.append_events(
        None, "resp_1", [event(3, "response.completed")], response("completed")
    )
    replay = await store.events_after(None, "resp_1", 0) or []
    assert await collect(follow(store, None, "resp_1", 0, replay)) == [1, 2, 3]
    assert await collect(follow(store, None, "resp_1", 3, [])) == []


async def test_a_run_ending_between_two_reads_still_sends_its_terminal_event(
    store: EndsRightAfterARead,
) -> None:
    store.pending_end = True
    assert await collect(follow(store, None, "resp_1", 2, [])) == [3]


async def test_a_deleted_response_ends_the_stream(store: EndsRightAfterARead) -> None:
    await store.delete_response(None, "resp_1")
    assert await collect(follow(store, None, "resp_1", 2, [])) == []
