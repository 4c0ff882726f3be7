"""Background runs: `background: true` answers `queued` at once; a worker task runs it.

The worker stores events as they come (small batches), so GET polls, stream resume and
live tails read the store, whichever replica they reach. Signals go through the store
(PostgreSQL LISTEN/NOTIFY, or in-process for SQLite): "events" wakes followers, "cancel"
stops the run on the replica that runs it. A heartbeat says this process is alive; runs
left unfinished by a process that died are failed with code `run_interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncGenerator
from contextlib import aclosing

from pydantic import TypeAdapter

from respond._ids import new_id
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.resource import TERMINAL_STATUSES, ResponseResource
from respond.responses.events import EventBuilder
from respond.responses.run import PreparedRun, Responses
from respond.store.base import JSON, Store

__all__ = ["Runs"]

log = logging.getLogger("respond.background")

FLUSH_SECONDS = 0.05  # how stale a live tail may be
HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 10  # a runner silent this long is dead; its runs fail
CANCEL_WAIT_SECONDS = 30.0
INTERRUPTED = "run_interrupted"
INTERRUPTED_MESSAGE = (
    "The server running this response stopped (crash or restart) before it finished. "
    "The run was not resumed; create it again."
)

_EVENTS: TypeAdapter[list[ev.Event]] = TypeAdapter(list[ev.Event])


class Runs:
    """This process's background runs, and the signals that reach them."""

    def __init__(self, service: Responses, store: Store, *, concurrency: int = 1) -> None:
        self.service = service
        self.store = store
        self.runner = new_id("runner")
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        store.subscribe(self._on_signal)

    # ------------------------------------------------------------ starting

    async def start(self, run: PreparedRun) -> ResponseResource:
        """Store the queued response, hand it to a worker, return it (status `queued`)."""
        if not run.resource.store:
            raise APIError(
                400,
                "Background responses must be stored: 'background' needs 'store' true.",
                param="store",
                code="invalid_value",
            )
        events = self.service.events(run)
        assert isinstance(events, AsyncGenerator)
        first = [await anext(events), await anext(events)]  # created, queued
        response = run.builder.response.model_copy(deep=True)
        await self.store.save_response(
            run.tenant,
            response.model_dump(mode="json"),
            run.input_items,
            [event.model_dump(mode="json") for event in first],
            runner=self.runner,
        )
        task = asyncio.ensure_future(self._work(run, events))
        self.tasks[response.id] = task
        task.add_done_callback(lambda _: self.tasks.pop(response.id, None))
        return response

    async def _work(self, run: PreparedRun, events: AsyncGenerator[ev.Event, None]) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._concurrency)
        # Closing the generator (also on cancel) makes the run end `cancelled` and record
        # itself in full: the last word in the store is always the run's own.
        async with aclosing(events), self._slots:
            pending: list[ev.Event] = []
            flushed = time.monotonic()
            async for event in events:
                if isinstance(event, ev.TERMINAL_EVENTS):
                    break  # the run stored itself in full before yielding its terminal event
                pending.append(event)
                # One delta can make several events: the builder's response is what the
                # events yielded so far describe only once the last one it made is here.
                if event is not run.builder.events[-1]:
                    continue
                # A status change is stored at once: pollers see in_progress right away.
                if (
                    isinstance(event, ev.ResponseInProgress)
                    or time.monotonic() - flushed >= FLUSH_SECONDS
                ):
                    pending, cancelled = await self._flush(run, pending)
                    flushed = time.monotonic()
                    if cancelled:  # asked on a replica whose signal did not reach us
                        log.info("cancelling %s: a cancel was requested", run.resource.id)
                        break
        await self.store.publish("events", run.resource.id)

    async def _flush(
        self, run: PreparedRun, pending: list[ev.Event]
    ) -> tuple[list[ev.Event], bool]:
        """Store pending events (kept for the next try on a store error) with the response
        they bring it to (the builder's, caught up with them).

        Returns what is still pending, and whether a cancel was requested.
        """
        try:
            cancelled = await self.store.append_events(
                run.tenant,
                run.resource.id,
                [event.model_dump(mode="json") for event in pending],
                run.builder.response.model_dump(mode="json"),
            )
        except Exception:
            log.exception("could not store events of %s", run.resource.id)
            return pending, False
        await self.store.publish("events", run.resource.id)
        return [], cancelled

    # ------------------------------------------------------------ cancelling

    async def cancel(self, tenant: str | None, response_id: str) -> JSON:
        stored = await self.store.get_response(tenant, response_id)
        if stored is None:
            raise APIError(
                404, f"Response with id '{response_id}' not found.", code="response_not_found"
            )
        if not stored.response.get("background"):
            raise APIError(400, "Cannot cancel a synchronous response.", code="invalid_value")
        if stored.response["status"] in TERMINAL_STATUSES:
            return stored.response  # cancelling a finished run changes nothing
        task = self.tasks.get(response_id)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:  # another replica runs it: keep the request, and signal it
            await self.store.request_cancel(tenant, response_id)
            await self.store.publish("cancel", response_id)
        return await self._until_ended(tenant, response_id, stored.response)

    async def _until_ended(self, tenant: str | None, response_id: str, last: JSON) -> JSON:
        deadline = time.monotonic() + CANCEL_WAIT_SECONDS
        while time.monotonic() < deadline:
            stored = await self.store.get_response(tenant, response_id)
            if stored is None:
                break
            last = stored.response
            if last["status"] in TERMINAL_STATUSES:
                break
            await self.wait_events(response_id, 0.5)
        return last

    # ------------------------------------------------------------ signals

    def _on_signal(self, kind: str, response_id: str) -> None:
        if kind == "cancel":
            task = self.tasks.get(response_id)
            if task is not None:
                log.info("cancelling %s on request from another replica", response_id)
                task.cancel()
        elif kind == "events":
            for waiter in self._waiters.get(response_id, ()):
                waiter.set()

    async def wait_events(self, response_id: str, timeout: float) -> None:
        """replay.Signals: return when `response_id` may have new events."""
        waiter = asyncio.Event()
        self._waiters[response_id].add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout)
        finally:
            waiters = self._waiters[response_id]
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[response_id]

    # ------------------------------------------------------------ upkeep

    async def maintain(self) -> None:
        """Heartbeat, and fail the runs of processes that died; runs until cancelled."""
        while True:
            try:
                await self.store.heartbeat(self.runner)
                await self.recover()
            except Exception:
                log.exception("background upkeep failed")
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def recover(self) -> int:
        recovered = 0
        for tenant, response in await self.store.orphans(self.runner, STALE_SECONDS):
            if await self._fail_orphan(tenant, response):
                recovered += 1
        return recovered

    async def _fail_orphan(self, tenant: str | None, response: JSON) -> bool:
        """End a run whose process died: its stored stream, resumed, ends with fail()."""
        response_id = response["id"]
        stored = await self.store.events_after(tenant, response_id, -1) or []
        events = _EVENTS.validate_python(stored)
        builder = EventBuilder.resume(ResponseResource.model_validate(response), events)
        ending = [] if builder.ended else builder.fail(INTERRUPTED, INTERRUPTED_MESSAGE)
        ended = await self.store.end_unfinished(
            tenant,
            response_id,
            builder.response.model_dump(mode="json"),
            [event.model_dump(mode="json") for event in ending],
        )
        if ended:
            log.warning("response %s was left unfinished by a stopped server: failed", response_id)
            await self.store.publish("events", response_id)
        return ended

    async def shutdown(self) -> None:
        """Stopping: running runs end `cancelled` (and are stored so)."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
