"""What the stateful routes share: the store, list queries, not-found errors."""

from __future__ import annotations

from fastapi import Request

from respond.protocol.errors import APIError
from respond.protocol.limits import Limits, check_id
from respond.responses.history import History
from respond.store.base import ListQuery, Store

__all__ = ["history_of", "limits_of", "list_query", "not_found", "store_of"]


def store_of(request: Request, kind: str, object_id: str) -> Store:
    """The store; without one (an app made with no store) nothing is ever found.

    `object_id` comes from the path: one no store could hold is a 400, not a store error."""
    check_id(object_id, f"{kind}_id", limits_of(request))
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
    after, before = params.get("after") or None, params.get("before") or None
    for name, value in (("after", after), ("before", before)):
        if value is not None:
            check_id(value, name, limits_of(request))
    return ListQuery(
        limit=limit,
        order=order,  # type: ignore[arg-type]
        after=after,
        before=before,
    )
