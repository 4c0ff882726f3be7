"""Background runs: `background: true` answers `queued` at once; some replica runs it.

A queued response is stored with its request, so any replica sharing the store can start
it: each claims queued runs it has room for (`--background-max`) atomically in the store,
so no run starts twice; the accepting replica claims it at once when it has room.

The worker stores events as they come (small batches), so GET polls, stream resume and
live tails read the store, whichever replica they reach. Signals go through the store
(PostgreSQL LISTEN/NOTIFY, or in-process for SQLite): "events" wakes followers, "cancel"
stops the run on the replica that runs it, "queued" says a run waits to be claimed. A
heartbeat says this process is alive; a run claimed by a process that died goes back to
the queue if it had not started, and is failed with code `run_interrupted` if it had.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from pydantic import TypeAdapter

from respond._config import DEFAULTS
from respond._ids import new_id
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.protocol.resource import TERMINAL_STATUSES, ResponseResource
from respond.responses.events import EventBuilder
from respond.responses.run import PreparedRun, Responses
from respond.store.base import JSON, Store, StoreFullError

__all__ = ["Runs"]

log = logging.getLogger("respond.background")

FLUSH_SECONDS = 0.05  # how stale a live tail may be
HEARTBEAT_SECONDS = 2.0  # also how often the queue is looked at without a signal
STALE_SECONDS = 10  # a runner silent this long is dead: the lease on its runs has ended
CANCEL_WAIT_SECONDS = 30.0
INTERRUPTED = "run_interrupted"
INTERRUPTED_MESSAGE = (
    "The server running this response stopped (crash or restart) before it finished. "
    "The run was not resumed; create it again."
)
STOPPED = "server_stopped"
STOPPED_MESSAGE = (
    "The server running this response was stopped before it finished (it had {seconds:.0f}s "
    "to finish, --drain-timeout). Its output so far is kept; create it again for the rest."
)

_EVENTS: TypeAdapter[list[ev.Event]] = TypeAdapter(list[ev.Event])
_OPENING = 2  # response.created, response.queued: stored when the run is accepted


class Runs:
    """This process's background runs, and the signals that reach them."""

    def __init__(
        self,
        service: Responses,
        store: Store,
        *,
        background_max: int = DEFAULTS.background_max,
        runner: str | None = None,
    ) -> None:
        self.service = service
        self.store = store
        # This process's id in the store (the app's file indexer claims work under it too).
        self.runner = runner or new_id("runner")
        self.background_max = background_max
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._held = 0  # runs this process has claimed (or is claiming) and not ended
        self._wake = asyncio.Event()  # the queue may have work this process can take
        self._stopping = False
        self._claiming = True
        self._runs: dict[str, PreparedRun] = {}  # the runs being generated now, by id
        self._settling: set[asyncio.Task[None]] = set()  # endings of runs cancelled unrun
        store.subscribe(self._on_signal)

    # ------------------------------------------------------------ starting

    async def start(self, run: PreparedRun) -> ResponseResource:
        """Store the queued response with its request; run it here if there is room."""
        if not run.resource.store:
            raise APIError(
                400,
                "Background responses must be stored: 'background' needs 'store' true.",
                param="store",
                code="invalid_value",
            )
        response = run.builder.response.model_copy(deep=True)
        body = run.body.model_dump(mode="json", exclude_unset=True, by_alias=True)
        # The run's own stream will make these same events again; its worker skips them.
        opening = EventBuilder(response.model_copy(deep=True)).start()
        mine = self._reserve(1) == 1
        try:
            # Inserted already claimed when it runs here: no other replica ever sees it free.
            await self.store.save_response(
                run.tenant,
                response.model_dump(mode="json"),
                run.input_items,
                [event.model_dump(mode="json") for event in opening],
                runner=self.runner if mine else None,
                request={"sealed": self.service.sealer.seal_request(body, run.tenant)},
            )
        except BaseException:
            if mine:
                self._unreserve(1)
            raise
        if mine:
            self._launch(run.tenant, response.model_dump(mode="json"), lambda: self._work(run))
        else:
            await self._signal("queued", response.id)
        return response

    def _reserve(self, wanted: int) -> int:
        """Take up to `wanted` of this process's free places; returns how many."""
        taken = max(0, min(wanted, self.background_max - self._held))
        self._held += taken
        return taken

    def _unreserve(self, count: int) -> None:
        self._held -= count
        self._wake.set()  # a place is free: look at the queue now

    def _launch(
        self, tenant: str | None, response: JSON, work: Callable[[], Awaitable[None]]
    ) -> None:
        """Run a claimed response; its place is freed when it ends.

        A task cancelled before its first step runs none of its coroutine (asyncio closes it
        unstarted), and `cancel` or `shutdown` can reach a task just launched: then the run
        would stay claimed by this live process, queued for ever. Its ending is made here.
        """
        response_id = response["id"]
        ran = False

        async def running() -> None:
            nonlocal ran
            ran = True
            await work()

        task = asyncio.ensure_future(running())
        self.tasks[response_id] = task

        def ended(_: asyncio.Task[None]) -> None:
            self.tasks.pop(response_id, None)
            self._unreserve(1)
            if not ran:
                settling = asyncio.ensure_future(self._settle_unrun(tenant, response))
                self._settling.add(settling)
                settling.add_done_callback(self._settling.discard)

        task.add_done_callback(ended)

    async def _not_run(self, tenant: str | None, response: JSON) -> None:
        """A claimed run cancelled before it started: when this process is stopping it goes
        back to the queue (another replica or the next start runs it); else it is cancelled."""
        if self._stopping:
            await self.store.release(self.runner, response["id"])
        else:
            await self._end(tenant, response, lambda builder: builder.cancel())

    async def _settle_unrun(self, tenant: str | None, response: JSON) -> None:
        try:
            await self._not_run(tenant, response)
        except Exception:
            log.exception("could not end %s, cancelled before it started", response["id"])

    async def claim(self) -> int:
        """Claim queued runs from the store for this process's free places; start them."""
        if not self._claiming:
            return 0
        engines = self.service.engines.values()
        if any(not engine.ready and engine.load_error is None for engine in engines):
            return 0  # still loading: a run prepared now would fail `model_loading`
        places = self._reserve(self.background_max)
        claimed: list[tuple[str | None, JSON, JSON]] = []
        try:
            claimed = await self.store.claim(self.runner, places)
        finally:
            self._held -= places - len(claimed)
        for tenant, response, request in claimed:
            log.info("starting queued response %s", response["id"])
            self._launch(
                tenant,
                response,
                functools.partial(self._start_stored, tenant, response, request),
            )
        return len(claimed)

    async def _start_stored(self, tenant: str | None, response: JSON, request: JSON) -> None:
        """Prepare a claimed response from its stored request, then run it."""
        response_id = response["id"]
        try:
            body = CreateResponseBody.model_validate(self._unsealed(tenant, request))
            stored = (response_id, int(response["created_at"]))
            run = await self.service.prepare(body, tenant=tenant, stored=stored)
        except asyncio.CancelledError:
            await self._not_run(tenant, response)
            raise
        except APIError as exc:  # e.g. its previous response was deleted meanwhile
            code, message = exc.code or "invalid_request", exc.message
            await self._end(tenant, response, lambda builder: builder.fail(code, message))
            return
        except Exception as exc:
            log.exception("could not start queued response %s", response_id)
            message = f"The server had an error: {exc}"
            await self._end(tenant, response, lambda b: b.fail("server_error", message))
            return
        await self._work(run)

    def _unsealed(self, tenant: str | None, request: JSON) -> JSON:
        try:
            return self.service.sealer.unseal_request(request["sealed"], tenant)
        except ValueError:
            raise APIError(
                500,
                "The run was queued by a server with another --secret-key: give every "
                "replica the same key (docs/deploy.md).",
                code="server_error",
            ) from None

    async def _work(self, run: PreparedRun) -> None:
        self._runs[run.resource.id] = run
        try:
            await self._generate(run)
        finally:
            del self._runs[run.resource.id]

    async def _generate(self, run: PreparedRun) -> None:
        events = self.service.events(run)
        # Closing the generator (also on cancel) makes the run end `cancelled` and record
        # itself in full: the last word in the store is always the run's own.
        async with aclosing(events):
            for _ in range(_OPENING):
                await anext(events)
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
                if isinstance(event, ev.ResponseInProgress):  # stored at once, for pollers
                    if not await self._begin(run, pending):
                        return
                    pending, flushed = [], time.monotonic()
                elif time.monotonic() - flushed >= FLUSH_SECONDS:
                    pending, cancelled = await self._flush(run, pending)
                    flushed = time.monotonic()
                    if cancelled:  # asked on a replica whose signal did not reach us
                        log.info("cancelling %s: a cancel was requested", run.resource.id)
                        break
        await self._signal("events", run.resource.id)

    async def _begin(self, run: PreparedRun, pending: list[ev.Event]) -> bool:
        """Store the run's start, fenced by its claim: a process that stalled past its lease
        may have had the run queued again and started elsewhere; then it must not run it."""
        try:
            started = await self.store.begin_claimed(
                run.tenant,
                run.resource.id,
                self.runner,
                [event.model_dump(mode="json") for event in pending],
                run.builder.response.model_dump(mode="json"),
            )
        except Exception:
            log.exception("could not start %s; it goes back to the queue", run.resource.id)
            with contextlib.suppress(Exception):
                await self.store.release(self.runner, run.resource.id)
            started = False
        if not started:
            log.warning("not starting %s: this process lost its claim on it", run.resource.id)
            run.resource.store = False  # its closing must not record over the other's run
        return started

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
        await self._signal("events", run.resource.id)
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
            self._stop(response_id, "on request")
            with contextlib.suppress(asyncio.CancelledError):
                await task
        elif stored.response["status"] == "queued" and await self.store.claim_one(
            self.runner, tenant, response_id
        ):  # nobody had started it: claimed, it is ended here
            await self._end(tenant, stored.response, lambda builder: builder.cancel())
        else:  # another replica runs it: keep the request, and signal it
            await self.store.request_cancel(tenant, response_id)
            await self._signal("cancel", response_id)
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

    async def _signal(self, kind: str, response_id: str) -> None:
        """Publish a signal; one the store cannot send now is logged, not raised. Every
        signal is a shortcut: followers poll, the heartbeat claims the queue and finds
        stored cancels. Raised inside a run's worker, it would end the run cancelled."""
        try:
            await self.store.publish(kind, response_id)
        except Exception as exc:
            log.warning("could not signal %s of %s (%s); polling finds it", kind, response_id, exc)

    def _on_signal(self, kind: str, response_id: str) -> None:
        if kind == "cancel":
            self._stop(response_id, "on request from another replica")
        elif kind == "events":
            for waiter in self._waiters.get(response_id, ()):
                waiter.set()
        elif kind == "queued":
            self._wake.set()

    def _stop(self, response_id: str, why: str) -> None:
        """Cancel the task of a run here, once: a second cancel could reach its closing."""
        task = self.tasks.get(response_id)
        if task is not None and not task.cancelling():
            log.info("cancelling %s %s", response_id, why)
            task.cancel()

    async def _stop_cancelled(self) -> None:
        """Stop the runs here whose cancel is requested in the store. The signal can be lost
        (a listener reconnecting), and a run waiting on a quiet engine flushes no events, the
        other place it would see the request: without this it would run on to its end."""
        for response_id in await self.store.cancels_requested(list(self.tasks)):
            self._stop(response_id, "as requested in the store")

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
        """Heartbeat, recover the runs of processes that died, claim queued runs; runs
        until cancelled. A signal (a run queued, a place freed) claims at once."""
        beaten = 0.0
        while True:
            self._wake.clear()
            try:
                if time.monotonic() - beaten >= HEARTBEAT_SECONDS:
                    await self.store.heartbeat(self.runner)
                    await self.recover()
                    await self._stop_cancelled()
                    beaten = time.monotonic()
                await self.claim()
            except StoreFullError as exc:  # the heartbeat tries again: it clears once it saves
                log.warning("background upkeep: %s", exc)
            except Exception:
                log.exception("background upkeep failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), HEARTBEAT_SECONDS)

    async def recover(self) -> int:
        """Requeue the unstarted runs of dead processes; fail their started ones."""
        requeued = await self.store.requeue(self.runner, STALE_SECONDS)
        if requeued:
            log.warning("%d queued responses of a stopped server are queued again", requeued)
        recovered = 0
        for tenant, response in await self.store.orphans(self.runner, STALE_SECONDS):
            if await self._end(tenant, response, _interrupted):
                log.warning("response %s was left unfinished by a stopped server", response["id"])
                recovered += 1
        return recovered

    async def _end(
        self,
        tenant: str | None,
        response: JSON,
        ending: Callable[[EventBuilder], list[ev.Event]],
    ) -> bool:
        """End a run nobody runs: its stored stream, resumed, ends with `ending`."""
        response_id = response["id"]
        stored = await self.store.events_after(tenant, response_id, -1) or []
        events = _EVENTS.validate_python(stored)
        builder = EventBuilder.resume(ResponseResource.model_validate(response), events)
        last = [] if builder.ended else ending(builder)
        ended = await self.store.end_unfinished(
            tenant,
            response_id,
            builder.response.model_dump(mode="json"),
            [event.model_dump(mode="json") for event in last],
        )
        if ended:
            await self._signal("events", response_id)
        return ended

    def stop_claiming(self) -> None:
        """Draining: queued runs are left to other replicas (or to the next start)."""
        self._claiming = False

    async def shutdown(self, drain_seconds: float = 0.0) -> None:
        """Stopping: running runs get `drain_seconds` to finish. Then a run that has made
        no output yet goes back to the queue, to be run from its stored request by another
        replica or the next start (no client has seen any of it); one that has ends
        failed `server_stopped`, its output kept. Claimed runs not yet started go back to
        the queue too."""
        self._stopping = True
        self._claiming = False
        if self.tasks and drain_seconds > 0:
            log.info("waiting up to %.0fs for %d background runs", drain_seconds, len(self.tasks))
            await asyncio.wait(list(self.tasks.values()), timeout=drain_seconds)
        handed_back = []
        for response_id, task in list(self.tasks.items()):
            run = self._runs.get(response_id)
            if run is not None and not run.builder.response.output:
                run.resource.store = False  # its closing must not record: the queue has it
                handed_back.append(run)
            elif run is not None:
                run.stopped = (STOPPED, STOPPED_MESSAGE.format(seconds=drain_seconds))
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(*self._settling)
        for run in handed_back:
            await self._hand_back(run)

    async def _hand_back(self, run: PreparedRun) -> None:
        response_id = run.resource.id
        opening = (await self.store.events_after(run.tenant, response_id, -1) or [])[:_OPENING]
        queued = opening[-1]["response"] if len(opening) == _OPENING else None
        if queued is not None and await self.store.hand_back(
            self.runner, run.tenant, response_id, queued, _OPENING
        ):
            log.info("response %s goes back to the queue (it had no output yet)", response_id)
            await self._signal("queued", response_id)
        else:
            log.warning("could not hand back %s; it ends as interrupted", response_id)
            await self._end(run.tenant, run.builder.response.model_dump(mode="json"), _interrupted)


def _interrupted(builder: EventBuilder) -> list[ev.Event]:
    return builder.fail(INTERRUPTED, INTERRUPTED_MESSAGE)
