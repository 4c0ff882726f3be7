"""The OpenAI Agents SDK's server-side compaction: `ModelSettings(context_management=...)`.

The SDK sends the entry on every request and keeps the `compaction` item the response
returns as a `CompactionItem`, which goes back with its next input (or stays in the stored
chain, by previous_response_id). respond compacts inside the run, and the next turn reads
from the item on: its usage is what that shorter context costs (counted by
/v1/responses/input_tokens with the model's tokenizer). The bundled model's summary is not
checked, only the mechanics.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
from agents.items import CompactionItem, TResponseInputItem
from agents.stream_events import RawResponsesStreamEvent

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server

set_tracing_disabled(True)

INSTRUCTIONS = "You answer briefly."
THRESHOLD = 100
NOTES = (
    "My notes for the trip: I fly to Lisbon on Monday and stay three nights near the river. "
    "On Thursday I take the train to Porto, where my sister lives, and we visit the old "
    "bookshop and the bridge. On Sunday I fly home from Porto. I must remember to pack a "
    "rain jacket, my passport, the charger for my phone and a present for my sister."
)
HISTORY: list[TResponseInputItem] = [
    {"role": "user", "content": NOTES},
    {"role": "assistant", "content": "Thank you, I have read your notes."},
    {"role": "user", "content": "Reply with one word: yes or no?"},
]
NEXT: TResponseInputItem = {"role": "user", "content": "And again: yes or no?"}


@pytest.fixture
async def client(server: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI, **settings: Any) -> Agent[Any]:
    return Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=ModelSettings(temperature=0, max_tokens=16, **settings),
    )


def compacting(client: openai.AsyncOpenAI) -> Agent[Any]:
    return agent(
        client, context_management=[{"type": "compaction", "compact_threshold": THRESHOLD}]
    )


async def tokens(client: openai.AsyncOpenAI, items: list[TResponseInputItem]) -> int:
    counted = await client.responses.input_tokens.count(
        model=BUNDLED_ALIAS, instructions=INSTRUCTIONS, input=items
    )
    return int(counted.input_tokens)


async def test_the_history_passes_the_threshold(client: openai.AsyncOpenAI) -> None:
    assert await tokens(client, HISTORY) > THRESHOLD


async def test_the_next_turn_reads_from_the_sdks_compaction_item(
    client: openai.AsyncOpenAI,
) -> None:
    first = await Runner.run(compacting(client), HISTORY)
    (compaction,) = [item for item in first.new_items if isinstance(item, CompactionItem)]
    raw: Any = compaction.raw_item
    assert raw["type"] == "compaction" and raw["encrypted_content"]
    assert isinstance(first.final_output, str) and first.final_output

    items = first.to_input_list()
    assert items[: len(HISTORY)] == HISTORY and raw in items
    from_compaction = items[items.index(raw) :]
    cost = await tokens(client, [*from_compaction, NEXT])
    without = [item for item in items if item != raw]
    assert cost < await tokens(client, [*without, NEXT])  # shorter than the history it replaced

    # Stateless: the SDK sends everything back; respond reads from the compaction on.
    resent = await Runner.run(agent(client), [*items, NEXT])
    assert resent.raw_responses[0].usage.input_tokens == cost
    # Stored: the chain continues from the compaction item too.
    chained = await Runner.run(agent(client), [NEXT], previous_response_id=first.last_response_id)
    assert chained.raw_responses[0].usage.input_tokens == cost


async def test_a_streamed_run_gets_the_compaction_events(client: openai.AsyncOpenAI) -> None:
    result = Runner.run_streamed(compacting(client), HISTORY)
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if isinstance(event, RawResponsesStreamEvent)
    ]
    assert kinds[-1] == "response.completed"
    assert "response.compaction.compacting" in kinds
    assert kinds.index("response.compaction.compacting") < kinds.index("response.output_text.delta")
    assert any(isinstance(item, CompactionItem) for item in result.new_items)
    assert isinstance(result.final_output, str) and result.final_output
