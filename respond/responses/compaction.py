"""POST /v1/responses/compact: the context of a turn as its user messages, kept verbatim,
then one `compaction` item standing for the whole of it (OpenAI's shape: a client that
replaces its history with the output keeps its own messages).

The `compaction` item's encrypted_content carries every context item (sealed with the
server's key, bound to the tenant: responses/sealing.py), so sending the output back as input
restores the context exactly: the items before a compaction item are not read again. It is
lossless rather than a summary: a small local model cannot summarize reliably, and a wrong
summary would silently change the conversation.
"""

from __future__ import annotations

import time
from typing import Any

from respond._ids import new_id
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
    tokens = await service.count_tokens(engine, turn)
    items = [stored_item(item) for item in context.items]
    sealed = service.history.pack(items, tenant)
    return {
        "id": new_id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*filter(_from_user, items), sealed],
        "usage": {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens,
        },
    }


def _from_user(item: dict[str, Any]) -> bool:
    return item["type"] == "message" and item.get("role") == "user"
