"""Stored history: what a new turn sees before its input, and what a finished run leaves.

Context of a turn, in order:
- `previous_response_id`: along the chain, oldest first, each response's input items then
  its output items (instructions are never inherited: they are not items);
- `conversation`: the conversation's items;
then the new input, where `item_reference` items are replaced by the stored items they
name and `compaction` items by the context they carry. A compaction item stands for the whole
context before it (it was made from that context, by POST /v1/responses/compact or inside a
run), so the items before the latest one are not read: a chain continues from its latest
compaction, and a client that resends a compacted response's output after its old input
does not pay for that input twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import TypeAdapter, ValidationError

from respond._ids import new_id
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    CompactionInput,
    ConversationRef,
    CreateResponseBody,
    InputItem,
    ItemReference,
)
from respond.protocol.resource import ResponseResource
from respond.responses.context import normalize_input, stored_item
from respond.responses.sealing import Sealer
from respond.store.base import JSON, Store

__all__ = ["Context", "History", "still_running"]

ITEMS: TypeAdapter[InputItem] = TypeAdapter(InputItem)
MAX_CHAIN = 1000  # previous_response_id hops; a longer chain is surely a loop


@dataclass
class Context:
    """The items a turn is built from."""

    history: list[InputItem] = field(default_factory=list)  # stored, already validated
    new: list[InputItem] = field(default_factory=list)  # this request's input, resolved
    new_stored: list[JSON] = field(default_factory=list)  # the same, as kept (with ids)
    conversation_id: str | None = None

    @property
    def items(self) -> list[InputItem]:
        return [*self.history, *self.new]


class History:
    """Reads context from the store and records finished runs into it.

    `sealer` seals what clients carry instead of the store keeping it (reasoning, compaction
    items); without one, blobs are valid only as long as this process lives.
    """

    def __init__(self, store: Store | None, sealer: Sealer | None = None) -> None:
        self.store = store
        self.sealer = sealer or Sealer.ephemeral()

    # ------------------------------------------------------------ reading

    async def context(
        self,
        body: CreateResponseBody,
        tenant: str | None,
        *,
        remembered: Sequence[InputItem] | None = None,
    ) -> Context:
        """`remembered`: the chain's items, already held by the caller (a WebSocket connection)."""
        if body.previous_response_id and body.conversation:
            raise APIError(
                400,
                "Use either 'previous_response_id' or 'conversation', not both.",
                param="conversation",
                code="invalid_value",
            )
        ctx = Context()
        if remembered is not None:
            ctx.history = self.opened(remembered, tenant)
        elif body.previous_response_id:
            ctx.history = await self._chain(body.previous_response_id, tenant)
        elif body.conversation:
            ctx.conversation_id = conversation_id(body.conversation)
            ctx.history = await self._conversation(ctx.conversation_id, tenant)
        ctx.new_stored = await self.resolve(normalize_input(body.input), tenant)
        ctx.new = self.expand(ctx.new_stored, tenant)
        if any(item.get("type") == "compaction" for item in ctx.new_stored):
            ctx.history = []  # the input's compaction stands for everything before it
        return ctx

    async def _chain(self, response_id: str, tenant: str | None) -> list[InputItem]:
        turns: list[list[JSON]] = []
        next_id: str | None = response_id
        while next_id is not None and len(turns) < MAX_CHAIN:
            stored = await self.store.get_response(tenant, next_id) if self.store else None
            if stored is None:
                raise APIError(
                    404,
                    f"Previous response with id '{next_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            if stored.response.get("status") in ("queued", "in_progress"):
                raise still_running(next_id)
            turns.append([*stored.input_items, *stored.output_items])
            next_id = stored.response.get("previous_response_id")
        items = [item for turn in reversed(turns) for item in turn]
        return self.expand(items, tenant)

    async def _conversation(self, conv_id: str, tenant: str | None) -> list[InputItem]:
        found = await self.store.get_conversation(tenant, conv_id) if self.store else None
        if found is None:
            raise APIError(
                404,
                f"Conversation with id '{conv_id}' not found.",
                param="conversation",
                code="conversation_not_found",
            )
        assert self.store is not None
        return self.expand(await self.store.conversation_items(tenant, conv_id), tenant)

    async def resolve(self, items: Sequence[InputItem], tenant: str | None) -> list[JSON]:
        """Input items as they are kept: ids given, item references replaced by their items."""
        out: list[JSON] = []
        for index, item in enumerate(items):
            if not isinstance(item, ItemReference):
                out.append(stored_item(item))
                continue
            found = await self.store.find_item(tenant, item.id) if self.store else None
            if found is None:
                raise APIError(
                    404,
                    f"Item with id '{item.id}' not found.",
                    param=f"input[{index}].id",
                    code="item_not_found",
                )
            out.append(found)
        return out

    def expand(self, items: Sequence[JSON], tenant: str | None) -> list[InputItem]:
        """Stored items -> input items an engine turn is built from (compactions opened)."""
        return self.opened([_parse(item) for item in items], tenant)

    def opened(self, items: Sequence[InputItem], tenant: str | None) -> list[InputItem]:
        """`items` from their latest compaction on, that compaction opened into the context
        it carries (it replaces every item before it)."""
        found = [i for i, item in enumerate(items) if isinstance(item, CompactionInput)]
        if not found:
            return list(items)
        latest = items[found[-1]]
        assert isinstance(latest, CompactionInput)
        carried = [_parse(inner) for inner in self.unpack(latest, tenant)]
        return [*carried, *items[found[-1] + 1 :]]

    # ------------------------------------------------------------ compaction

    def pack(self, items: list[JSON], tenant: str | None) -> JSON:
        """A compaction item carrying `items`, sealed so only this server (and tenant) can
        open it."""
        return {
            "type": "compaction",
            "id": new_id("cmp"),
            "encrypted_content": self.sealer.seal_items(items, tenant),
        }

    def unpack(self, item: CompactionInput, tenant: str | None) -> list[JSON]:
        try:
            return self.sealer.unseal_items(item.encrypted_content, tenant)
        except ValueError as exc:
            raise APIError(
                400,
                "The compaction item's encrypted_content is invalid or was made by another "
                "server or tenant.",
                param="input",
                code="invalid_encrypted_content",
            ) from exc

    # ------------------------------------------------------------ recording

    async def record(
        self,
        tenant: str | None,
        input_items: list[JSON],
        response: ResponseResource,
        events: list[ev.Event],
    ) -> None:
        """ResponseRecorder: keep a finished run (its conversation gains input and output)."""
        if self.store is None:
            return
        await self.store.save_response(
            tenant,
            response.model_dump(mode="json"),
            input_items,
            [event.model_dump(mode="json") for event in events],
            conversation_id=(response.conversation or {}).get("id"),
        )


def still_running(response_id: str) -> APIError:
    """Continuing a response before it has ended: there is no whole output to continue from."""
    return APIError(
        400,
        f"Previous response with id '{response_id}' is still in progress: wait for its "
        "terminal event (or cancel it) before continuing from it.",
        param="previous_response_id",
        code="previous_response_in_progress",
    )


def conversation_id(value: str | ConversationRef) -> str:
    return value if isinstance(value, str) else value.id


def _parse(item: JSON) -> InputItem:
    try:
        return ITEMS.validate_python(item)
    except ValidationError as exc:  # stored by an older version, or corrupted
        raise APIError(500, f"A stored item cannot be read: {exc}", code="server_error") from exc
