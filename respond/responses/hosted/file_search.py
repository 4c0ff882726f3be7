"""The file_search family: searching the tenant's vector stores inside the response.

A request's `{"type": "file_search", "vector_store_ids": [...], ...}` tool becomes one
hosted tool the model sees as the function `file_search(queries)`. Its calls are run by
respond (files/: the same search as POST /v1/vector_stores/{id}/search), become
`file_search_call` items, and their chunks join the context, numbered, for the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from respond import _model_json as model_json
from respond.files import FileService, Hit, check_filter
from respond.protocol.errors import APIError
from respond.protocol.files import Filter
from respond.protocol.limits import check_kind
from respond.protocol.tools import FileSearchTool
from respond.responses.hosted._base import Hosted, refuse_named_function
from respond.responses.hosted._toolset import Request
from respond.responses.hosted_call import CallResult, HostedTool
from respond.responses.kinds.file_search_call import search_results_text

__all__ = ["INCLUDE_RESULTS", "VISIBLE", "FileSearchTools"]

VISIBLE = "file_search"
INCLUDE_RESULTS = "file_search_call.results"
MAX_QUERIES = 4
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "description": "What to search the files for: one or a few short queries.",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "minItems": 1,
            "maxItems": MAX_QUERIES,
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}
DESCRIPTION = "Search the user's uploaded files; answer from the results it returns."
_FILTER: TypeAdapter[Any] = TypeAdapter(Filter)


class FileSearchTools:
    """Makes the file_search tool of a request (when the app keeps files)."""

    def __init__(self, service: FileService | None = None) -> None:
        self.service = service

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The request's file_search tool, forced when `tool_choice` names it. Unknown (or
        another tenant's) vector stores are a 404 naming the field."""
        body, tenant = request.body, request.tenant
        found = [(i, t) for i, t in enumerate(body.tools) if isinstance(t, FileSearchTool)]
        forced = isinstance(body.tool_choice, dict) and body.tool_choice.get("type") == VISIBLE
        if not found:
            if forced:
                raise APIError(
                    400,
                    "tool_choice names file_search, but no such tool is given.",
                    param="tool_choice",
                )
            return Hosted()
        if len(found) > 1:
            raise APIError(400, "Give at most one file_search tool.", param=f"tools[{found[1][0]}]")
        index, tool = found[0]
        where = f"tools[{index}]"
        refuse_named_function(body.tools, VISIBLE, "file_search", where)
        if self.service is None:
            raise APIError(501, "This server keeps no files (it has no store).", code="unsupported")
        executor = await _Executor.make(self.service, tenant, tool, where, body.include)
        hosted = HostedTool(
            visible=VISIBLE,
            server_label=VISIBLE,
            name=VISIBLE,
            description=DESCRIPTION,
            parameters=PARAMETERS,
            needs_approval=False,
            executor=executor,
            family="file_search",
        )
        return Hosted(tools={VISIBLE: hosted}, forced=(VISIBLE,) if forced else None)


class _Executor:
    def __init__(
        self,
        service: FileService,
        tenant: str | None,
        store_ids: list[str],
        options: dict[str, Any],
        include: bool,
    ) -> None:
        self.service = service
        self.tenant = tenant
        self.store_ids = store_ids
        self.options = options
        self.include = include

    @classmethod
    async def make(
        cls,
        service: FileService,
        tenant: str | None,
        tool: FileSearchTool,
        where: str,
        include: Sequence[str],
    ) -> _Executor:
        ids = tool.vector_store_ids
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise APIError(
                400,
                "'vector_store_ids' must list the vector stores to search.",
                param=f"{where}.vector_store_ids",
            )
        for store_id in ids:
            check_kind(store_id, f"{where}.vector_store_ids", "vector_store")
            if await service.files.get_vector_store(tenant, store_id) is None:
                raise APIError(
                    404,
                    f"Vector store with id '{store_id[:64]}' not found.",
                    param=f"{where}.vector_store_ids",
                    code="vector_store_not_found",
                )
        limit = tool.max_num_results
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
            raise APIError(
                400, "'max_num_results' must be 1 to 50.", param=f"{where}.max_num_results"
            )
        filters = None
        if tool.filters is not None:
            try:
                filters = _FILTER.validate_python(tool.filters)
            except ValidationError:
                raise APIError(400, "Invalid 'filters'.", param=f"{where}.filters") from None
            check_filter(filters, f"{where}.filters")
        ranking = tool.ranking_options or {}
        threshold = ranking.get("score_threshold", 0.0) if isinstance(ranking, dict) else 0.0
        if not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
            raise APIError(
                400,
                "'score_threshold' must be 0 to 1.",
                param=f"{where}.ranking_options.score_threshold",
            )
        options = {"filters": filters, "limit": limit, "score_threshold": float(threshold)}
        return cls(service, tenant, list(ids), options, INCLUDE_RESULTS in include)

    async def call(self, name: str, arguments: str) -> CallResult:
        try:
            asked = model_json.loads(arguments)["queries"]
            queries = [q for q in asked if isinstance(q, str) and q]
        except (ValueError, KeyError, TypeError):
            queries = []
        if not queries:
            error = {"type": "invalid_arguments", "message": "file_search needs 'queries'."}
            return CallResult(error=error)
        try:
            hits = await self.service.search(
                self.tenant, self.store_ids, queries[:MAX_QUERIES], **self.options
            )
        except APIError as exc:
            if exc.status < 500:
                raise
            # The embedding upstream failed: the call fails, and the model is told so.
            return CallResult(error={"type": exc.code or "server_error", "message": exc.message})
        found = tuple(dict.fromkeys((hit.file_id, hit.filename) for hit in hits))
        results = [_result(hit) for hit in hits]
        return CallResult(
            output=search_results_text(results),
            results=results if self.include else None,
            found=found,
        )


def _result(hit: Hit) -> dict[str, Any]:
    return {
        "file_id": hit.file_id,
        "filename": hit.filename,
        "score": round(hit.score, 6),
        "text": hit.text,
        "attributes": hit.attributes,
    }
