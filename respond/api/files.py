"""The Files API: upload (multipart), list, retrieve, content, delete (OpenAI's shapes)."""

from __future__ import annotations

import mimetypes
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from respond._ids import new_id
from respond.api._common import JSONRoute, read_upload, tenant_of
from respond.api._docs import ERRORS
from respond.api._state import limits_of, not_found
from respond.files import FileService
from respond.protocol.errors import APIError
from respond.protocol.files import PURPOSES, FileObject
from respond.protocol.limits import check_id
from respond.protocol.state import Deleted
from respond.store.base import ListQuery, UnknownCursorError

__all__ = ["file_service", "router"]

router = APIRouter(route_class=JSONRoute, tags=["files"])

KIND = "file"
# `expires_after[seconds]` bounds, as OpenAI has them: an hour to 30 days.
EXPIRY_SECONDS = (3600, 30 * 24 * 3600)

_UPLOAD_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "purpose"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "purpose": {"type": "string", "enum": list(PURPOSES)},
                        "expires_after[anchor]": {"type": "string", "enum": ["created_at"]},
                        "expires_after[seconds]": {"type": "integer"},
                    },
                }
            }
        },
    }
}


def file_service(request: Request, kind: str = KIND, object_id: str | None = None) -> FileService:
    """The app's file service (a 404 for `object_id` when the app keeps no state)."""
    if object_id is not None:
        check_id(object_id, f"{kind}_id", limits_of(request), kind)
    service: FileService | None = request.app.state.files
    if service is None:
        if object_id is not None:
            raise not_found(kind, object_id)
        raise APIError(501, "This server keeps no files (it has no store).", code="unsupported")
    return service


@router.post("/v1/files", response_model=FileObject, responses=ERRORS, openapi_extra=_UPLOAD_DOC)
async def upload_file(request: Request) -> JSONResponse:
    tenant = tenant_of(request)
    service = file_service(request)
    upload = await read_upload(
        request,
        service.max_file_bytes,
        max_fields=16,
        missing="Missing required parameter: 'file'.",
    )
    purpose = _purpose(upload.fields.get("purpose"))
    now = int(time.time())
    file = {
        "id": new_id("file"),
        "object": "file",
        "bytes": len(upload.content),
        "created_at": now,
        "expires_at": _expires_at(
            upload.fields.get("expires_after[anchor]"),
            upload.fields.get("expires_after[seconds]"),
            now,
        ),
        "filename": upload.filename,
        "purpose": purpose,
        "status": "processed",
        "status_details": None,
    }
    await service.files.create_file(tenant, file, upload.content)
    return JSONResponse(file)


def _purpose(value: object) -> str:
    if value is None:
        raise APIError(
            400,
            "Missing required parameter: 'purpose'.",
            param="purpose",
            code="missing_required_parameter",
        )
    if value not in PURPOSES:
        raise APIError(
            400,
            f"Invalid value for 'purpose': {str(value)[:64]!r}; use one of {', '.join(PURPOSES)}.",
            param="purpose",
        )
    return str(value)


def _expires_at(anchor: object, seconds: object, now: int) -> int | None:
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise APIError(
            400, "'expires_after[anchor]' must be 'created_at'.", param="expires_after.anchor"
        )
    low, high = EXPIRY_SECONDS
    if not (isinstance(seconds, str) and seconds.isdigit() and low <= int(seconds) <= high):
        raise APIError(
            400,
            f"'expires_after[seconds]' must be an integer from {low} to {high}.",
            param="expires_after.seconds",
        )
    return now + int(seconds)


@router.get("/v1/files", responses=ERRORS)
async def list_files(
    request: Request,
    purpose: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Page size, 1-10000.")] = 10_000,
    order: Annotated[Literal["asc", "desc"], Query(description="By creation time.")] = "desc",
    after: Annotated[str | None, Query(max_length=256, description="A file id.")] = None,
) -> JSONResponse:
    tenant = tenant_of(request)
    service = file_service(request)
    if after:
        check_id(after, "after", limits_of(request))
    query = ListQuery(limit=limit, order=order, after=after or None)
    try:
        page = await service.files.list_files(tenant, purpose or None, query)
    except UnknownCursorError as exc:
        raise APIError(400, str(exc), param=exc.param) from exc
    return JSONResponse(page.wire())


@router.get("/v1/files/{file_id}", response_model=FileObject, responses=ERRORS)
async def retrieve_file(request: Request, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    file = await file_service(request, KIND, file_id).files.get_file(tenant, file_id)
    if file is None:
        raise not_found(KIND, file_id)
    return JSONResponse(file)


@router.get("/v1/files/{file_id}/content", responses=ERRORS)
async def file_content(request: Request, file_id: str) -> Response:
    tenant = tenant_of(request)
    found = await file_service(request, KIND, file_id).files.file_content(tenant, file_id)
    if found is None:
        raise not_found(KIND, file_id)
    file, content = found
    media = mimetypes.guess_type(file["filename"])[0] or "application/octet-stream"
    return Response(content, media_type=media)


@router.delete("/v1/files/{file_id}", response_model=Deleted, responses=ERRORS)
async def delete_file(request: Request, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    if not await file_service(request, KIND, file_id).files.delete_file(tenant, file_id):
        raise not_found(KIND, file_id)
    # OpenAI answers a deleted file as object "file" (a vector store as "vector_store.deleted").
    return JSONResponse({"id": file_id, "object": "file", "deleted": True})
