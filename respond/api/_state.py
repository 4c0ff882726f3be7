"""What the stateful routes share: the store, list queries, not-found errors."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request

from respond.api._common import tenant_of
from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, check_id
from respond.responses.history import History
from respond.store.base import JSON, ItemOwner, ListQuery, Store, UnknownCursorError

__all__ = ["ListParams", "history_of", "item_page", "limits_of", "not_found", "store_of"]


def store_of(request: Request, kind: str, object_id: str) -> Store:
    """The store; without one (an app made with no store) nothing is ever found.

    `object_id` comes from the path: one no store could hold is a 400, not a store error."""
    check_id(object_id, f"{kind}_id", limits_of(request), kind)
    store: Store | None = request.app.state.store
    if store is None:
        raise not_found(kind, object_id)
    return store


def limits_of(request: Request) -> Limits:
    limits: Limits = request.app.state.responses.limits
    return limits


def history_of(request: Request) -> History:
    history: History = request.app.state.history
    return history


def not_found(kind: str, object_id: str, param: str | None = None) -> APIError:
    code = f"{kind}_not_found"
    label = kind.capitalize()
    return APIError(404, f"{label} with id '{object_id}' not found.", param=param, code=code)


def _list_query(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size, 1-100.")] = 20,
    order: Annotated[Literal["asc", "desc"], Query(description="By position.")] = "desc",
    after: Annotated[str | None, Query(max_length=256, description="An item id.")] = None,
    before: Annotated[str | None, Query(max_length=256, description="An item id.")] = None,
) -> ListQuery:
    """Cursor pagination as OpenAI does it; FastAPI validates (and documents) each value."""
    for name, value in (("after", after), ("before", before)):
        if value:
            check_id(value, name, limits_of(request))  # no NUL or bad Unicode reaches a store
    return ListQuery(limit=limit, order=order, after=after or None, before=before or None)


ListParams = Annotated[ListQuery, Depends(_list_query)]


async def item_page(
    request: Request, store: Store, owner: ItemOwner, owner_id: str, query: ListQuery, kind: str
) -> JSON:
    """One page of a response's or a conversation's items, as the list endpoints answer."""
    tenant = tenant_of(request)
    try:
        page = await store.list_items(tenant, owner, owner_id, query)
    except UnknownCursorError as exc:
        raise APIError(400, str(exc), param=exc.param, code="invalid_value") from exc
    if page is None:
        raise not_found(kind, owner_id)
    return page.wire()
