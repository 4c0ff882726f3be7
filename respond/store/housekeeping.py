"""Periodic store upkeep: expired objects are deleted, not only hidden: responses and
conversations past their time to live, and files past their `expires_after`."""

from __future__ import annotations

import asyncio
import logging

from respond.store.base import Store
from respond.store.files import FileStore
from respond.store.sql import SQLStore

__all__ = ["purge_forever", "purge_once"]

log = logging.getLogger("respond.store")

PURGE_EVERY_SECONDS = 3600.0


async def purge_forever(store: Store, every: float = PURGE_EVERY_SECONDS) -> None:
    """Purge now, then every `every` seconds (expired objects are invisible meanwhile)."""
    while True:
        try:
            purged = await purge_once(store)
            if purged:
                log.info("purged %d expired objects from the store", purged)
        except Exception:
            log.exception("purging expired objects failed")
        await asyncio.sleep(every)


async def purge_once(store: Store) -> int:
    """Delete what has expired; how many objects went."""
    purged = await store.purge_expired()
    if isinstance(store, SQLStore):  # files live only in SQL stores
        purged += await FileStore(store).purge_expired()
    return purged
