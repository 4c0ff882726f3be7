"""What the stateful routes share: the store, list queries, not-found errors."""

from __future__ import annotations

from fastapi import Request

from respond.api._common import tenant_of
from respond.protocol.errors import APIError
from respond.responses.history import History
from respond.store.base import JSON, ItemOwner, ListQuery, Store, UnknownCursorError

__all__ = ["history_of", "item_page", "list_query", "not_found", "store_of"]


def store_of(request: Request, kind: str, object_id: str) -> Store:
    """The store; without one (an app made with no store) nothing is ever found."""
    store: Store | None = request.app.state.store
    if store is None:
        raise not_found(kind, object_id)
    return store


def history_of(request: Request) -> History:
    history: History = request.app.state.history
    return history


def not_found(kind: str, object_id: str, param: str | None = None) -> APIError:
    code = f"{kind}_not_found"
    label = kind.capitalize()
    return APIError(404, f"{label} with id '{object_id}' not found.", param=param, code=code)


def list_query(request: Request) -> ListQuery:
    """limit (1-100, default 20), order (asc|desc, default desc), after, before."""
    params = request.query_params
    raw_limit = params.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise APIError(
            400,
            f"Invalid 'limit': {raw_limit!r}; expected an integer from 1 to 100.",
            param="limit",
            code="invalid_value",
        )
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise APIError(
            400,
            f"Invalid 'order': {order!r}; expected 'asc' or 'desc'.",
            param="order",
            code="invalid_value",
        )
    return ListQuery(
        limit=limit,
        order=order,  # type: ignore[arg-type]
        after=params.get("after") or None,
        before=params.get("before") or None,
    )


async def item_page(
    request: Request, store: Store, owner: ItemOwner, owner_id: str, kind: str
) -> JSON:
    """One page of a response's or a conversation's items, as the list endpoints answer."""
    tenant = tenant_of(request)
    try:
        page = await store.list_items(tenant, owner, owner_id, list_query(request))
    except UnknownCursorError as exc:
        raise APIError(400, str(exc), param=exc.param, code="invalid_value") from exc
    if page is None:
        raise not_found(kind, owner_id)
    return page.wire()
