"""A LlamaIndex `FunctionAgent` on `OpenAIResponses`, run against respond by
tests/clients/test_llamaindex.py in LlamaIndex's own venv (`make llamaindex`).

Prints one JSON line: the tool calls the agent made (with what its tool returned) and the
agent's final answer. The first turn's call is forced (`initial_tool_choice="required"`), as
the tiny bundled model picks no tool by itself; the agent then sends the result back and the
model answers, a whole round trip through the Responses API.
"""

import asyncio
import json
import sys

# Installed in LlamaIndex's own venv only, so the project's mypy does not see them.
from llama_index.core.agent.workflow import (  # type: ignore[import-not-found]
    FunctionAgent,
    ToolCallResult,
)
from llama_index.llms.openai import OpenAIResponses  # type: ignore[import-not-found]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


async def main(base_url: str, model: str) -> None:
    llm = OpenAIResponses(
        model=model,
        api_base=base_url,
        api_key="any",
        temperature=0,
        max_output_tokens=48,
        # LlamaIndex knows the context window of OpenAI's own models only.
        context_window=8192,
        max_retries=0,
    )
    # "required", not the tool's name: LlamaIndex sends a named choice in Chat Completions'
    # shape ({"function": {"name": ...}}), which the Responses API (OpenAI's too) refuses.
    agent = FunctionAgent(tools=[get_weather], llm=llm, initial_tool_choice="required")
    handler = agent.run("What is the weather in Paris?")
    calls: list[dict[str, str]] = []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            calls.append({"name": event.tool_name, "output": str(event.tool_output)})
    answer = await handler
    print(json.dumps({"calls": calls, "answer": str(answer)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
