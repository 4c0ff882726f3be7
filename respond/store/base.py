"""The store interface: what respond keeps between requests, whatever the database.

Everything is kept as wire JSON (plain dicts), so a stored object is exactly what a
client saw. Every read and write names the tenant; an object of another tenant is
reported as missing, never as forbidden, so ids reveal nothing across tenants.
`tenant=None` (no API keys, or a plain key) is a tenant like any other.

The contract every store keeps, SQLite and PostgreSQL alike (tests/unit/test_store.py runs
the same cases on both, tests/e2e/test_store_load.py interleaves them from many clients):

- One writer at a time: each operation is one transaction, and writes that touch the same
  object are applied one after the other, never interleaved. SQLite has one writer connection
  behind a lock (one write transaction in the whole store); on PostgreSQL a write holds the
  rows it changes until it commits (and takes those it reads first with `FOR UPDATE`).
- Reads never share a writer's transaction: a read runs in a read-only transaction of its own,
  on a connection of its own, sees only committed data and never waits for a writer (SQLite's
  WAL readers, PostgreSQL's MVCC). No two operations ever share a transaction, so no request
  sees another's.
- Every transaction is closed on every path: committed whole, or rolled back on any exception,
  cancellation included (a request whose client hung up leaves nothing open for the next one).
- A database that cannot be reached raises StoreUnavailableError (503 `store_unavailable`), one
  out of space StoreFullError (507 `storage_full`); nothing is half-written either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ItemOwner",
    "StoreError",
    "StoreFullError",
    "StoreUnavailableError",
    "UnknownCursorError",
    "ListQuery",
    "Page",
    "ConversationStore",
    "ResponseStore",
    "RunQueue",
    "Store",
    "StoredResponse",
]

JSON = dict[str, Any]


class StoreError(Exception):
    """A request the store cannot serve as asked; the API layer says why to the client."""


class StoreFullError(StoreError):
    """The database has no space left for a write: its disk (or quota) is full."""

    def __init__(self) -> None:
        super().__init__(
            "The server's store has no space left, so nothing can be saved; free space on "
            "its disk (or its database's quota), then retry."
        )


class StoreUnavailableError(StoreError):
    """The database cannot be reached (restarting, down, the connection lost)."""

    def __init__(self, cause: object) -> None:
        super().__init__(
            f"The server's store cannot be reached right now ({cause}); retry shortly."
        )


class UnknownCursorError(StoreError):
    """A list's `after` / `before` names an item that is not in that list."""

    def __init__(self, param: str, item_id: str) -> None:
        super().__init__(f"No item with id '{item_id}' in this list.")
        self.param = param
        self.item_id = item_id


# Whose items a list or lookup is about: a response's input or output, or a conversation.
ItemOwner = Literal["input", "output", "conversation"]


@dataclass(frozen=True)
class StoredResponse:
    response: JSON  # the response object as GET returns it
    input_items: list[JSON]  # the resolved input of this turn (with ids), in order
    output_items: list[JSON]


@dataclass(frozen=True)
class ListQuery:
    """Cursor pagination as OpenAI does it: `after`/`before` are item ids."""

    limit: int = 20
    order: Literal["asc", "desc"] = "desc"
    after: str | None = None
    before: str | None = None


@dataclass(frozen=True)
class Page:
    data: list[JSON] = field(default_factory=list)
    has_more: bool = False

    def wire(self) -> JSON:
        return {
            "object": "list",
            "data": self.data,
            "first_id": self.data[0]["id"] if self.data else None,
            "last_id": self.data[-1]["id"] if self.data else None,
            "has_more": self.has_more,
        }


class ResponseStore(ABC):
    """Responses: each with its resolved input, its output items and its stream events."""

    @abstractmethod
    async def save_response(
        self,
        tenant: str | None,
        response: JSON,
        input_items: list[JSON],
        events: list[JSON],
        *,
        conversation_id: str | None = None,
        runner: str | None = None,
        request: JSON | None = None,
    ) -> None:
        """Insert or replace a response with its items and its full event list.

        Output items are taken from `response["output"]`. When `conversation_id` is set,
        the input and output items are appended to that conversation in the same
        transaction. `runner` names the process running an unfinished response. A queued
        response with a `request` (its create body) and no runner waits in the queue.
        """

    @abstractmethod
    async def get_response(self, tenant: str | None, response_id: str) -> StoredResponse | None: ...

    @abstractmethod
    async def delete_response(self, tenant: str | None, response_id: str) -> bool: ...

    @abstractmethod
    async def append_events(
        self, tenant: str | None, response_id: str, events: list[JSON], response: JSON
    ) -> bool:
        """Add events of a running response and update its current state.

        Returns True when a cancel of this response has been requested (`request_cancel`).
        """

    @abstractmethod
    async def request_cancel(self, tenant: str | None, response_id: str) -> None:
        """Ask whichever process runs this response to stop it."""

    @abstractmethod
    async def cancels_requested(self, response_ids: Collection[str]) -> list[str]:
        """Those of `response_ids` (the runs of one process) whose cancel was requested."""

    @abstractmethod
    async def events_after(
        self, tenant: str | None, response_id: str, after: int
    ) -> list[JSON] | None:
        """Stored events with sequence_number > after (None: no such response)."""

    @abstractmethod
    async def list_items(
        self, tenant: str | None, owner: ItemOwner, owner_id: str, query: ListQuery
    ) -> Page | None:
        """A page of a response's input items or a conversation's items (None: no owner).

        Raises UnknownCursorError when `query.after` / `query.before` is not in the list.
        """

    @abstractmethod
    async def find_item(self, tenant: str | None, item_id: str) -> JSON | None:
        """Any stored item of this tenant by id (for `item_reference` inputs)."""


class RunQueue(ABC):
    """Background runs waiting and running: who runs what, alive or not, and the signals
    that reach them ("events", "cancel", "queued")."""

    @abstractmethod
    async def heartbeat(self, runner: str) -> None:
        """Say that process `runner` is alive."""

    @abstractmethod
    async def orphans(self, runner: str, stale_after: int) -> list[tuple[str | None, JSON]]:
        """Unfinished responses (with tenants) whose runner is not `runner` and has not
        heartbeated for `stale_after` seconds (any other runner, if the store is exclusive)."""

    @abstractmethod
    async def requeue(self, runner: str, stale_after: int) -> int:
        """Put back in the queue the queued (not yet started) responses claimed by runners
        other than `runner` that are dead (as for `orphans`); returns how many."""

    @abstractmethod
    async def claim(self, runner: str, limit: int) -> list[tuple[str | None, JSON, JSON]]:
        """Claim for `runner` up to `limit` queued responses nobody runs, oldest first:
        (tenant, response, request) of each. Atomic: no response is claimed twice."""

    @abstractmethod
    async def claim_one(self, runner: str, tenant: str | None, response_id: str) -> bool:
        """Claim one queued response nobody runs; False when it is not such a response."""

    @abstractmethod
    async def begin_claimed(
        self, tenant: str | None, response_id: str, runner: str, events: list[JSON], response: JSON
    ) -> bool:
        """`append_events` for the first events of a run `runner` starts, only while it still
        holds the claim on the queued response: False (nothing written) when it lost it."""

    @abstractmethod
    async def release(self, runner: str, response_id: str) -> None:
        """Put a response `runner` claimed, and has not started, back in the queue."""

    @abstractmethod
    async def hand_back(
        self, runner: str, tenant: str | None, response_id: str, queued: JSON, keep: int
    ) -> bool:
        """Put a run `runner` started, and will not finish, back in the queue as it was
        accepted: `queued` as its body, its first `keep` events, no runner. Only while it
        is still this runner's and unfinished (False otherwise: nothing is written)."""

    @abstractmethod
    async def end_unfinished(
        self, tenant: str | None, response_id: str, response: JSON, events: list[JSON]
    ) -> bool:
        """Atomically give a still unfinished response its last events (the terminal one
        last) and its final state. False when it has ended meanwhile: nothing is written."""

    @abstractmethod
    async def publish(self, kind: str, response_id: str) -> None:
        """Tell every process using this store (this one included) about `response_id`:
        "events" (new events stored) or "cancel" (stop running it)."""

    @abstractmethod
    def subscribe(self, handler: Callable[[str, str], None]) -> None:
        """Call `handler(kind, response_id)` for every signal published."""


class ConversationStore(ABC):
    """Conversations and their items."""

    @abstractmethod
    async def create_conversation(
        self, tenant: str | None, conversation: JSON, items: list[JSON]
    ) -> None: ...

    @abstractmethod
    async def get_conversation(self, tenant: str | None, conversation_id: str) -> JSON | None: ...

    @abstractmethod
    async def update_conversation(
        self, tenant: str | None, conversation_id: str, metadata: dict[str, str]
    ) -> JSON | None: ...

    @abstractmethod
    async def delete_conversation(self, tenant: str | None, conversation_id: str) -> bool: ...

    @abstractmethod
    async def add_conversation_items(
        self, tenant: str | None, conversation_id: str, items: list[JSON]
    ) -> bool:
        """Append items; False when the conversation does not exist."""

    @abstractmethod
    async def conversation_items(self, tenant: str | None, conversation_id: str) -> list[JSON]:
        """All items of a conversation, oldest first (the context of a new turn)."""

    @abstractmethod
    async def get_conversation_item(
        self, tenant: str | None, conversation_id: str, item_id: str
    ) -> JSON | None: ...

    @abstractmethod
    async def delete_conversation_item(
        self, tenant: str | None, conversation_id: str, item_id: str
    ) -> bool: ...


class Store(ResponseStore, RunQueue, ConversationStore):
    """Everything respond keeps, with a time to live: the three rooms, opened and closed
    together, and purged of what has expired."""

    ttl_seconds: int
    # True when one process owns the store (SQLite): every other runner is then dead.
    exclusive: bool = False
    # Told (operation, seconds, failed) after each operation; the app's metrics set it.
    observer: Callable[[str, float, bool], None] | None = None
    # A write found no space left; the next write that commits clears it (the heartbeat
    # writes every few seconds, so the service comes back on its own when space returns).
    full: bool = False
    # The database could not be reached; the next transaction that commits clears it.
    unreachable: bool = False

    @abstractmethod
    async def open(self) -> None:
        """Connect and run pending migrations."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def purge_expired(self) -> int:
        """Delete everything whose time to live has passed; returns how many objects."""
