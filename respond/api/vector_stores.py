"""The Vector Stores API: stores, their files, file batches, content and search."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from respond._ids import new_id
from respond.api._common import JSONRoute, tenant_of
from respond.api._docs import ERRORS
from respond.api._state import ListParams, limits_of, not_found
from respond.api.files import file_service
from respond.files import FileService, resolve
from respond.protocol.errors import APIError
from respond.protocol.files import (
    FileBatchCreateBody,
    SearchBody,
    VectorStore,
    VectorStoreCreateBody,
    VectorStoreFile,
    VectorStoreFileBody,
    VectorStoreFileUpdateBody,
    VectorStoreUpdateBody,
)
from respond.protocol.limits import check_id
from respond.protocol.state import Deleted, deleted
from respond.store.base import JSON, Page, UnknownCursorError

__all__ = ["router"]

router = APIRouter(route_class=JSONRoute, tags=["vector stores"])

STORE = "vector_store"
PREFIX = "/v1/vector_stores"
# The SDK's *_and_poll helpers wait this long between polls (OpenAI's header).
POLL_HEADERS = {"openai-poll-after-ms": "250"}
StatusFilter = Literal["in_progress", "completed", "failed", "cancelled"]


def _service(request: Request, store_id: str | None = None) -> FileService:
    return file_service(request, STORE, store_id)


async def _page(request: Request, fetch: Any) -> JSONResponse:
    try:
        page: Page = await fetch
    except UnknownCursorError as exc:
        raise APIError(400, str(exc), param=exc.param) from exc
    return JSONResponse(page.wire())


# ---------------------------------------------------------------- vector stores


@router.post(PREFIX, response_model=VectorStore, responses=ERRORS)
async def create_store(request: Request, body: VectorStoreCreateBody) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request)
    strategy = _strategy(body.chunking_strategy, "chunking_strategy")
    await _check_files(request, service, tenant, body.file_ids, "file_ids")
    now = int(time.time())
    store: JSON = {
        "id": new_id("vs"),
        "object": "vector_store",
        "created_at": now,
        "name": body.name,
        "description": body.description,
        "metadata": body.metadata or {},
        "expires_after": body.expires_after.model_dump() if body.expires_after else None,
        "last_active_at": now,
    }
    await service.files.create_vector_store(tenant, store)
    for file_id in body.file_ids:
        await _attach(service, tenant, store["id"], file_id, None, strategy)
    return JSONResponse(await _store(service, tenant, store["id"]), headers=POLL_HEADERS)


@router.get(PREFIX, responses=ERRORS)
async def list_stores(request: Request, query: ListParams) -> JSONResponse:
    tenant = tenant_of(request)
    return await _page(request, _service(request).files.list_vector_stores(tenant, query))


@router.get(PREFIX + "/{vector_store_id}", response_model=VectorStore, responses=ERRORS)
async def retrieve_store(request: Request, vector_store_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    return JSONResponse(await _store(service, tenant, vector_store_id), headers=POLL_HEADERS)


@router.post(PREFIX + "/{vector_store_id}", response_model=VectorStore, responses=ERRORS)
async def update_store(
    request: Request, vector_store_id: str, body: VectorStoreUpdateBody
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name
    if body.metadata is not None:
        changes["metadata"] = body.metadata
    if "expires_after" in body.model_fields_set:  # null: never expire
        changes["expires_after"] = body.expires_after.model_dump() if body.expires_after else None
    store = await service.files.update_vector_store(tenant, vector_store_id, changes)
    if store is None:
        raise not_found(STORE, vector_store_id)
    return JSONResponse(store)


@router.delete(PREFIX + "/{vector_store_id}", response_model=Deleted, responses=ERRORS)
async def delete_store(request: Request, vector_store_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    if not await _service(request, vector_store_id).files.delete_vector_store(
        tenant, vector_store_id
    ):
        raise not_found(STORE, vector_store_id)
    return JSONResponse(deleted(vector_store_id, STORE))


async def _store(service: FileService, tenant: str | None, store_id: str) -> JSON:
    store = await service.files.get_vector_store(tenant, store_id)
    if store is None:
        raise not_found(STORE, store_id)
    return store


# ---------------------------------------------------------------- search


@router.post(PREFIX + "/{vector_store_id}/search", responses=ERRORS)
async def search(request: Request, vector_store_id: str, body: SearchBody) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    queries = [body.query] if isinstance(body.query, str) else body.query
    if not queries or not any(q.strip() for q in queries):
        raise APIError(400, "'query' must have some text.", param="query")
    hits = await service.search(
        tenant,
        [vector_store_id],
        queries,
        filters=body.filters,
        limit=body.max_num_results,
        score_threshold=body.ranking_options.score_threshold if body.ranking_options else 0.0,
    )
    return JSONResponse(
        {
            "object": "vector_store.search_results.page",
            "search_query": queries,
            "data": [hit.wire() for hit in hits],
            "has_more": False,
            "next_page": None,
        }
    )


# ---------------------------------------------------------------- the files of a store


@router.post(PREFIX + "/{vector_store_id}/files", response_model=VectorStoreFile, responses=ERRORS)
async def attach_file(
    request: Request, vector_store_id: str, body: VectorStoreFileBody
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    strategy = _strategy(body.chunking_strategy, "chunking_strategy")
    await _store(service, tenant, vector_store_id)
    await _check_files(request, service, tenant, [body.file_id], "file_id")
    entry = await _attach(service, tenant, vector_store_id, body.file_id, body.attributes, strategy)
    return JSONResponse(entry, headers=POLL_HEADERS)


@router.get(PREFIX + "/{vector_store_id}/files", responses=ERRORS)
async def list_store_files(
    request: Request,
    vector_store_id: str,
    query: ListParams,
    filter: Annotated[StatusFilter | None, Query(description="Only files in this status.")] = None,
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    await _store(service, tenant, vector_store_id)
    listed = service.files.list_store_files(tenant, vector_store_id, query, status=filter)
    return await _page(request, listed)


@router.get(
    PREFIX + "/{vector_store_id}/files/{file_id}", response_model=VectorStoreFile, responses=ERRORS
)
async def retrieve_store_file(request: Request, vector_store_id: str, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    entry = await _store_file(request, service, tenant, vector_store_id, file_id)
    return JSONResponse(entry, headers=POLL_HEADERS)


@router.post(
    PREFIX + "/{vector_store_id}/files/{file_id}", response_model=VectorStoreFile, responses=ERRORS
)
async def update_store_file(
    request: Request, vector_store_id: str, file_id: str, body: VectorStoreFileUpdateBody
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    check_id(file_id, "file_id", limits_of(request), "file")
    entry = await service.files.update_store_file(
        tenant, vector_store_id, file_id, {"attributes": body.attributes or {}}
    )
    if entry is None:
        await _store(service, tenant, vector_store_id)
        raise not_found("file", file_id)
    return JSONResponse(entry)


@router.delete(
    PREFIX + "/{vector_store_id}/files/{file_id}", response_model=Deleted, responses=ERRORS
)
async def detach_file(request: Request, vector_store_id: str, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    check_id(file_id, "file_id", limits_of(request), "file")
    if not await service.files.detach(tenant, vector_store_id, file_id):
        await _store(service, tenant, vector_store_id)
        raise not_found("file", file_id)
    return JSONResponse(deleted(file_id, "vector_store.file"))


@router.get(PREFIX + "/{vector_store_id}/files/{file_id}/content", responses=ERRORS)
async def store_file_content(request: Request, vector_store_id: str, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    await _store_file(request, service, tenant, vector_store_id, file_id)
    texts = await service.chunks.file_chunks(vector_store_id, file_id)
    return JSONResponse(
        {
            "object": "vector_store.file_content.page",
            "data": [{"type": "text", "text": text} for text in texts],
            "has_more": False,
            "next_page": None,
        }
    )


async def _store_file(
    request: Request, service: FileService, tenant: str | None, store_id: str, file_id: str
) -> JSON:
    check_id(file_id, "file_id", limits_of(request), "file")
    entry = await service.files.get_store_file(tenant, store_id, file_id)
    if entry is None:
        await _store(service, tenant, store_id)  # say which is missing
        raise not_found("file", file_id)
    return entry


# ---------------------------------------------------------------- file batches


@router.post(PREFIX + "/{vector_store_id}/file_batches", responses=ERRORS)
async def create_batch(
    request: Request, vector_store_id: str, body: FileBatchCreateBody
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    if body.file_ids and body.files:
        raise APIError(400, "Give 'file_ids' or 'files', not both.", param="files")
    if not (body.file_ids or body.files):
        raise APIError(
            400,
            "Missing required parameter: 'file_ids'.",
            param="file_ids",
            code="missing_required_parameter",
        )
    strategy = _strategy(body.chunking_strategy, "chunking_strategy")
    wanted = [
        (f.file_id, f.attributes, _strategy(f.chunking_strategy, f"files[{i}].chunking_strategy"))
        for i, f in enumerate(body.files)
    ] or [(file_id, body.attributes, strategy) for file_id in body.file_ids]
    await _store(service, tenant, vector_store_id)
    param = "files" if body.files else "file_ids"
    await _check_files(request, service, tenant, [w[0] for w in wanted], param)
    batch: JSON = {
        "id": new_id("vsfb"),
        "object": "vector_store.files_batch",
        "created_at": int(time.time()),
        "vector_store_id": vector_store_id,
        "status": "in_progress",
    }
    await service.files.create_batch(tenant, batch)
    for file_id, attributes, sizes in wanted:
        await _attach(service, tenant, vector_store_id, file_id, attributes, sizes, batch["id"])
    return JSONResponse(
        await _batch(service, tenant, vector_store_id, batch["id"]), headers=POLL_HEADERS
    )


@router.get(PREFIX + "/{vector_store_id}/file_batches/{batch_id}", responses=ERRORS)
async def retrieve_batch(request: Request, vector_store_id: str, batch_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    check_id(batch_id, "batch_id", limits_of(request), "file_batch")
    return JSONResponse(
        await _batch(service, tenant, vector_store_id, batch_id), headers=POLL_HEADERS
    )


@router.post(PREFIX + "/{vector_store_id}/file_batches/{batch_id}/cancel", responses=ERRORS)
async def cancel_batch(request: Request, vector_store_id: str, batch_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    check_id(batch_id, "batch_id", limits_of(request), "file_batch")
    if not await service.files.cancel_batch(tenant, vector_store_id, batch_id):
        await _store(service, tenant, vector_store_id)
        raise not_found("file_batch", batch_id)
    return JSONResponse(await _batch(service, tenant, vector_store_id, batch_id))


@router.get(PREFIX + "/{vector_store_id}/file_batches/{batch_id}/files", responses=ERRORS)
async def list_batch_files(
    request: Request,
    vector_store_id: str,
    batch_id: str,
    query: ListParams,
    filter: Annotated[StatusFilter | None, Query(description="Only files in this status.")] = None,
) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, vector_store_id)
    check_id(batch_id, "batch_id", limits_of(request), "file_batch")
    await _batch(service, tenant, vector_store_id, batch_id)
    listed = service.files.list_store_files(
        tenant, vector_store_id, query, status=filter, batch_id=batch_id
    )
    return await _page(request, listed)


async def _batch(service: FileService, tenant: str | None, store_id: str, batch_id: str) -> JSON:
    batch = await service.files.get_batch(tenant, store_id, batch_id)
    if batch is None:
        await _store(service, tenant, store_id)
        raise not_found("file_batch", batch_id)
    return batch


# ---------------------------------------------------------------- shared


def _strategy(strategy: Any, param: str) -> JSON:
    """The request's chunking strategy, resolved to the static sizes it means."""
    return resolve(strategy.model_dump() if strategy is not None else None, param).wire()


async def _check_files(
    request: Request, service: FileService, tenant: str | None, file_ids: list[str], param: str
) -> None:
    """Every file exists for this tenant, before anything is attached."""
    for i, file_id in enumerate(file_ids):
        where = param if param == "file_id" else f"{param}[{i}]"
        check_id(file_id, where, limits_of(request), "file")
        if await service.files.get_file(tenant, file_id) is None:
            raise not_found("file", file_id, param=where)


async def _attach(
    service: FileService,
    tenant: str | None,
    store_id: str,
    file_id: str,
    attributes: dict[str, Any] | None,
    strategy: JSON,
    batch_id: str | None = None,
) -> JSON:
    entry = {
        "id": file_id,
        "object": "vector_store.file",
        "usage_bytes": 0,
        "created_at": int(time.time()),
        "vector_store_id": store_id,
        "status": "in_progress",
        "last_error": None,
        "attributes": attributes or {},
        "chunking_strategy": strategy,
    }
    if not await service.files.attach(tenant, store_id, entry, batch_id):
        raise not_found("file", file_id, param="file_id")
    service.indexer.wake()
    return entry
