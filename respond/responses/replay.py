"""Stream resume: replay a stored response's events, then follow it live until it ends.

Live events reach the store as a background run produces them (possibly on another
replica), so following is reading the store again whenever a signal says there may be
more (or after a short poll interval, in case a signal is missed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio

from respond.protocol import events as ev
from respond.protocol.resource import TERMINAL_STATUSES
from respond.store.base import Store

__all__ = ["Signals", "follow"]

POLL_SECONDS = 0.5


class Signals(Protocol):
    async def wait_events(self, response_id: str, timeout: float) -> None:
        """Return when new events of `response_id` may be stored (or after `timeout`)."""


class _Poll:
    async def wait_events(self, response_id: str, timeout: float) -> None:
        await anyio.sleep(min(timeout, 0.1))


async def follow(
    store: Store,
    tenant: str | None,
    response_id: str,
    after: int,
    replay: list[dict[str, Any]],
    signals: Signals | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """`replay` (the stored events after `after`), then new ones until the terminal event."""
    waiter = signals or _Poll()
    last, pending = after, replay
    while True:
        for event in pending:
            yield event
            last = event["sequence_number"]
            if event["type"] in ev.TERMINAL_TYPES:
                return
        # Status first, events second: a run that ends in between still has its last
        # events (the terminal one included) read below.
        running = await _running(store, tenant, response_id)
        pending = await store.events_after(tenant, response_id, last) or []
        if not pending:
            if not running:  # ended (or deleted) with nothing more to send
                return
            await waiter.wait_events(response_id, POLL_SECONDS)


async def _running(store: Store, tenant: str | None, response_id: str) -> bool:
    stored = await store.get_response(tenant, response_id)
    return stored is not None and stored.response["status"] not in TERMINAL_STATUSES
