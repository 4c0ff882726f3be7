"""The OpenAI Agents SDK's `WebSearchTool` against the real server and bundled model.

Set up as the SDK's docs say for a custom endpoint (an `AsyncOpenAI(base_url=...)` client
in `OpenAIResponsesModel`, tracing disabled), respond started with `--web-search searxng`
pointed at a FAKE SearXNG (the web cannot be reached here: tests/support/fake_searxng.py),
the search forced (`tool_choice="web_search"`) at temperature 0: the tool reaches the
model, respond runs the search, and the run ends with the model's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    WebSearchTool,
    set_tracing_disabled,
)
from agents.items import ToolCallItem
from openai.types.responses import ResponseFunctionWebSearch

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.fake_searxng import FakeSearxng, flags
from tests.support.server import Server, start_server

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory, searxng: FakeSearxng) -> Iterator[Server]:
    srv = start_server(
        Path(tmp_path_factory.mktemp("agents-web")), "--threads", "2", *flags(searxng)
    )
    yield srv
    srv.stop()


@pytest.fixture
async def client(searcher: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=searcher.base_url, api_key="unused") as sdk:
        yield sdk


def agent(client: openai.AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name="searcher",
        instructions="Search the web for the user's question, then answer in one word.",
        model=OpenAIResponsesModel(model=BUNDLED_ALIAS, openai_client=client),
        model_settings=ModelSettings(
            temperature=0,
            max_tokens=400,
            tool_choice="web_search",
            response_include=["web_search_call.action.sources"],
        ),
        tools=[WebSearchTool(search_context_size="low")],
    )


async def test_a_forced_web_search_runs_and_the_agent_answers(
    client: openai.AsyncOpenAI, searxng: FakeSearxng
) -> None:
    result = await Runner.run(agent(client), "Where do llamas live?")
    searches = [
        item.raw_item
        for item in result.new_items
        if isinstance(item, ToolCallItem) and isinstance(item.raw_item, ResponseFunctionWebSearch)
    ]
    assert searches and searches[0].status == "completed"
    action = searches[0].action
    assert action.type == "search" and action.query in searxng.queries
    assert action.sources and {s.url for s in action.sources} <= {e.url for e in searxng.corpus}
    assert isinstance(result.final_output, str)
