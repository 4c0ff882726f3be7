"""POST /v1/responses/compact: the whole context of a turn, sealed into one item.

The `compaction` item's encrypted_content carries every context item (AES-GCM with a
server key kept in the store, bound to the tenant), so sending it back as input restores
the context exactly. It is lossless rather than a summary: a small local model cannot
summarize reliably, and a wrong summary would silently change the conversation.
"""

from __future__ import annotations

import time
from typing import Any

from respond._ids import new_id
from respond.engines._base import EngineError
from respond.protocol.errors import APIError
from respond.protocol.requests import CreateResponseBody
from respond.protocol.state import CompactBody
from respond.responses.context import stored_item
from respond.responses.run import Responses

__all__ = ["compact"]


async def compact(service: Responses, body: CompactBody, tenant: str | None) -> dict[str, Any]:
    request = CreateResponseBody(
        model=body.model,
        input=body.input,
        previous_response_id=body.previous_response_id,
        instructions=body.instructions,
    )
    engine, turn, context, _ = await service.assemble(request, tenant)
    try:
        tokens = await engine.count_tokens(turn)
    except EngineError as exc:
        raise APIError(exc.status, exc.message, code=exc.code) from exc
    items = [stored_item(item) for item in context.items]
    sealed = await service.history.pack(items, tenant)
    return {
        "id": new_id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [sealed],
        "usage": {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens,
        },
    }
