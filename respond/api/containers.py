"""The Containers API: containers and their files (OpenAI's shapes), for code_interpreter.

Thin routes over the `ContainerService` (respond/containers/), which exists when the server
runs with `--code-interpreter`; without it every route answers 501 saying so. Any replica
lists and reads containers; only the one holding a container serves its files' bytes or
changes them (others answer 409 naming it).
"""

from __future__ import annotations

import mimetypes
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from respond.api._common import JSONRoute, read_upload, tenant_of
from respond.api._docs import ERRORS
from respond.api._state import ListParams, limits_of
from respond.containers import ContainerService, missing, missing_file
from respond.protocol.containers import (
    DEFAULT_MINUTES,
    Container,
    ContainerCreateBody,
    ContainerFile,
    ContainerFileBody,
)
from respond.protocol.errors import APIError, from_error_list
from respond.protocol.limits import check_id
from respond.protocol.state import Deleted
from respond.store.base import UnknownCursorError

__all__ = ["router"]

router = APIRouter(route_class=JSONRoute, tags=["containers"])

PREFIX = "/v1/containers"

_UPLOAD_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["file_id"],
                    "properties": {"file_id": {"type": "string"}},
                }
            },
        },
    }
}


def _service(request: Request, container_id: str | None = None) -> ContainerService:
    if container_id is not None:
        check_id(container_id, "container_id", limits_of(request), "container")
    service: ContainerService | None = request.app.state.containers
    if service is None:
        raise APIError(
            501,
            "The code interpreter is off on this server: start respond with "
            "--code-interpreter (docs/tools.md#code-interpreter).",
            code="unsupported",
        )
    return service


async def _paged(fetch: Any) -> JSONResponse:
    try:
        page = await fetch
    except UnknownCursorError as exc:
        raise APIError(400, str(exc), param=exc.param, code="invalid_value") from exc
    return JSONResponse(page.wire())


# ---------------------------------------------------------------- containers


@router.post(PREFIX, response_model=Container, responses=ERRORS)
async def create_container(request: Request, body: ContainerCreateBody) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request)
    for index, file_id in enumerate(body.file_ids):
        check_id(file_id, f"file_ids[{index}]", limits_of(request), "file")
    minutes = body.expires_after.minutes if body.expires_after else DEFAULT_MINUTES
    container = await service.create(
        tenant, body.name, minutes=minutes, file_ids=body.file_ids, param="file_ids"
    )
    return JSONResponse(container)


@router.get(PREFIX, responses=ERRORS)
async def list_containers(
    request: Request,
    query: ListParams,
    name: Annotated[str | None, Query(max_length=256, description="Only this name.")] = None,
) -> JSONResponse:
    tenant = tenant_of(request)
    return await _paged(_service(request).list_containers(tenant, name, query))


@router.get(PREFIX + "/{container_id}", response_model=Container, responses=ERRORS)
async def retrieve_container(request: Request, container_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    container = await _service(request, container_id).get(tenant, container_id)
    if container is None:
        raise missing(container_id)
    return JSONResponse(container)


@router.delete(PREFIX + "/{container_id}", response_model=Deleted, responses=ERRORS)
async def delete_container(request: Request, container_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    if not await _service(request, container_id).delete(tenant, container_id):
        raise missing(container_id)
    return JSONResponse({"id": container_id, "object": "container.deleted", "deleted": True})


# ---------------------------------------------------------------- their files


@router.post(
    PREFIX + "/{container_id}/files",
    response_model=ContainerFile,
    responses=ERRORS,
    openapi_extra=_UPLOAD_DOC,
)
async def create_file(request: Request, container_id: str) -> JSONResponse:
    """A multipart `file`, or JSON naming a `file_id` of the Files API to copy in."""
    tenant = tenant_of(request)
    service = _service(request, container_id)
    await service.held(tenant, container_id)  # before reading a body it would refuse
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        upload = await read_upload(
            request,
            service.max_file_bytes,
            max_fields=4,
            missing="Send the file as the multipart field 'file', or JSON with a 'file_id'.",
        )
        name, content = upload.filename, upload.content
    else:
        name, content = await _copied(request, service, tenant)
    return JSONResponse(await service.add_file(tenant, container_id, name, content))


async def _copied(
    request: Request, service: ContainerService, tenant: str | None
) -> tuple[str, bytes]:
    try:
        body = ContainerFileBody.model_validate(await request.json())
    except ValueError as exc:
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        if errors:
            raise from_error_list(errors, {}) from exc
        raise APIError(
            400,
            "Send the file as multipart/form-data ('file'), or JSON with a 'file_id'.",
            param="file_id",
        ) from exc
    check_id(body.file_id, "file_id", limits_of(request), "file")
    found = await service.files.file_content(tenant, body.file_id)
    if found is None:
        raise APIError(
            404,
            f"File with id '{body.file_id}' not found.",
            param="file_id",
            code="file_not_found",
        )
    file, content = found
    return str(file["filename"]), content


@router.get(PREFIX + "/{container_id}/files", responses=ERRORS)
async def list_files(request: Request, container_id: str, query: ListParams) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, container_id)
    if await service.get(tenant, container_id) is None:
        raise missing(container_id)
    return await _paged(service.store.list_files(tenant, container_id, query))


@router.get(
    PREFIX + "/{container_id}/files/{file_id}", response_model=ContainerFile, responses=ERRORS
)
async def retrieve_file(request: Request, container_id: str, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, container_id)
    check_id(file_id, "file_id", limits_of(request), "container_file")
    file = await service.store.get_file(tenant, container_id, file_id)
    if file is None:
        raise missing_file(file_id)
    return JSONResponse(file)


@router.get(PREFIX + "/{container_id}/files/{file_id}/content", responses=ERRORS)
async def file_content(request: Request, container_id: str, file_id: str) -> Response:
    tenant = tenant_of(request)
    service = _service(request, container_id)
    check_id(file_id, "file_id", limits_of(request), "container_file")
    file, content = await service.file_content(tenant, container_id, file_id)
    media = mimetypes.guess_type(str(file["path"]))[0] or "application/octet-stream"
    return Response(content, media_type=media)


@router.delete(PREFIX + "/{container_id}/files/{file_id}", response_model=Deleted, responses=ERRORS)
async def delete_file(request: Request, container_id: str, file_id: str) -> JSONResponse:
    tenant = tenant_of(request)
    service = _service(request, container_id)
    check_id(file_id, "file_id", limits_of(request), "container_file")
    if not await service.delete_file(tenant, container_id, file_id):
        raise missing_file(file_id)
    return JSONResponse({"id": file_id, "object": "container.file.deleted", "deleted": True})
