"""Periodic store upkeep: expired objects are deleted, not only hidden."""

from __future__ import annotations

import asyncio
import logging

from respond.store.base import Store

__all__ = ["purge_forever"]

log = logging.getLogger("respond.store")

PURGE_EVERY_SECONDS = 3600.0


async def purge_forever(store: Store, every: float = PURGE_EVERY_SECONDS) -> None:
    """Purge now, then every `every` seconds (expired objects are invisible meanwhile)."""
    while True:
        try:
            purged = await store.purge_expired()
            if purged:
                log.info("purged %d expired objects from the store", purged)
        except Exception:
            log.exception("purging expired objects failed")
        await asyncio.sleep(every)
