"""The container a hosted tool's calls run in, set up once for the families that run code
(code_interpreter.py, shell.py): one of the tenant's containers named by id, checked when
the request comes; or a new one (`container_auto`, code_interpreter's `{"type": "auto"}`)
with copies of the request's files, checked then and made at the tool's first call.
"""

from __future__ import annotations

from typing import Any

from respond.containers import ContainerService, Ran
from respond.protocol.errors import APIError
from respond.protocol.limits import check_kind

__all__ = ["InContainer", "held_container", "new_container_files"]


async def held_container(
    service: ContainerService, tenant: str | None, container_id: str, param: str
) -> str:
    """`container_id`, a container of the tenant running on this replica: a missing one is
    a 404, an expired one a 400, one held by another replica a 409, each naming `param`."""
    check_kind(container_id, param, "container")
    await service.held(tenant, container_id, param)
    return container_id


async def new_container_files(
    service: ContainerService, tenant: str | None, file_ids: Any, param: str
) -> list[str]:
    """The files a new container is made with: a list of the tenant's file ids (None: none);
    a file that is not there is a 404 naming `param`."""
    file_ids = file_ids or []
    if not isinstance(file_ids, list) or not all(isinstance(i, str) for i in file_ids):
        raise APIError(400, "'file_ids' must be a list of file ids.", param=param)
    for file_id in file_ids:
        check_kind(file_id, param, "file")
        if await service.files.get_file(tenant, file_id) is None:
            raise APIError(
                404,
                f"File with id '{file_id[:64]}' not found.",
                param=param,
                code="file_not_found",
            )
    return list(file_ids)


class InContainer:
    """Runs a hosted tool's calls in one container, the new one made at the first call
    (`create_with`: its files; None: it exists)."""

    # The name a container made at the first call is given (`code_interpreter (auto)`).
    auto_name: str

    def __init__(
        self,
        service: ContainerService,
        tenant: str | None,
        container_id: str,
        create_with: list[str] | None,
    ) -> None:
        self.service = service
        self.tenant = tenant
        self.container_id = container_id
        self.create_with = create_with

    async def run_in_container(self, program: str) -> Ran:
        """Run the Python `program` in the container, made first if it is new. Raises the
        container service's APIError (the container went) or SandboxError."""
        if self.create_with is not None:
            await self.service.create(
                self.tenant,
                self.auto_name,
                file_ids=self.create_with,
                container_id=self.container_id,
            )
            self.create_with = None
        return await self.service.run(self.tenant, self.container_id, program)
