"""The Conversations API: conversations and their items (OpenAI's shapes)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from respond._ids import new_id
from respond.api._common import JSONRoute, tenant_of
from respond.api._docs import ERRORS
from respond.api._state import (
    ListParams,
    history_of,
    item_page,
    limits_of,
    not_found,
    store_of,
)
from respond.protocol.limits import check_id
from respond.protocol.state import (
    Conversation,
    ConversationCreateBody,
    ConversationItemsBody,
    Deleted,
    ItemList,
    MetadataBody,
    deleted,
)
from respond.store.base import Page

router = APIRouter(route_class=JSONRoute, tags=["conversations"])

KIND = "conversation"


@router.post("/v1/conversations", response_model=Conversation, responses=ERRORS)
async def create_conversation(request: Request, body: ConversationCreateBody) -> JSONResponse:
    tenant = tenant_of(request)
    conversation_id = new_id("conv")
    conversation = {
        "id": conversation_id,
        "object": "conversation",
        "created_at": int(time.time()),
        "metadata": body.metadata or {},
    }
    store = store_of(request, KIND, conversation_id)
    items = await history_of(request).resolve(body.items, tenant)
    await store.create_conversation(tenant, conversation, items)
    return JSONResponse(conversation)


@router.get("/v1/conversations/{conversation_id}", response_model=Conversation, responses=ERRORS)
async def retrieve_conversation(request: Request, conversation_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    conversation = await store.get_conversation(tenant, conversation_id)
    if conversation is None:
        raise not_found(KIND, conversation_id)
    return JSONResponse(conversation)


@router.post("/v1/conversations/{conversation_id}", response_model=Conversation, responses=ERRORS)
async def update_conversation(
    request: Request, conversation_id: str, body: MetadataBody
) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    conversation = await store.update_conversation(tenant, conversation_id, body.metadata)
    if conversation is None:
        raise not_found(KIND, conversation_id)
    return JSONResponse(conversation)


@router.delete("/v1/conversations/{conversation_id}", response_model=Deleted, responses=ERRORS)
async def delete_conversation(request: Request, conversation_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    if not await store.delete_conversation(tenant, conversation_id):
        raise not_found(KIND, conversation_id)
    return JSONResponse(deleted(conversation_id, KIND))


@router.post("/v1/conversations/{conversation_id}/items", response_model=ItemList, responses=ERRORS)
async def create_items(
    request: Request, conversation_id: str, body: ConversationItemsBody
) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    items = await history_of(request).resolve(body.items, tenant)
    if not await store.add_conversation_items(tenant, conversation_id, items):
        raise not_found(KIND, conversation_id)
    return JSONResponse(Page(data=items).wire())


@router.get("/v1/conversations/{conversation_id}/items", response_model=ItemList, responses=ERRORS)
async def list_items(request: Request, conversation_id: str, query: ListParams) -> JSONResponse:
    store = store_of(request, KIND, conversation_id)
    page = await item_page(request, store, "conversation", conversation_id, query, KIND)
    return JSONResponse(page)


@router.get("/v1/conversations/{conversation_id}/items/{item_id}", responses=ERRORS)
async def retrieve_item(request: Request, conversation_id: str, item_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    check_id(item_id, "item_id", limits_of(request))
    item = await store.get_conversation_item(tenant, conversation_id, item_id)
    if item is None:
        raise await _missing(request, tenant, conversation_id, item_id)
    return JSONResponse(item)


@router.delete(
    "/v1/conversations/{conversation_id}/items/{item_id}",
    response_model=Conversation,
    responses=ERRORS,
)
async def delete_item(request: Request, conversation_id: str, item_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    store = store_of(request, KIND, conversation_id)
    check_id(item_id, "item_id", limits_of(request))
    if not await store.delete_conversation_item(tenant, conversation_id, item_id):
        raise await _missing(request, tenant, conversation_id, item_id)
    conversation = await store.get_conversation(tenant, conversation_id)
    if conversation is None:
        raise not_found(KIND, conversation_id)
    return JSONResponse(conversation)


async def _missing(
    request: Request, tenant: str | None, conversation_id: str, item_id: str
) -> Exception:
    """Say which is missing: the conversation, or the item in it."""
    store = store_of(request, KIND, conversation_id)
    if await store.get_conversation(tenant, conversation_id) is None:
        return not_found(KIND, conversation_id)
    return not_found("item", item_id)
