"""LangChain's `ChatOpenAI(use_responses_api=True)` against the real server."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from respond.engines.llamacpp import BUNDLED_ALIAS
from tests.support.server import Server

PROMPT = "Reply with one word: yes or no?"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


def chat(server: Server, max_tokens: int = 16) -> ChatOpenAI:
    return ChatOpenAI(
        model=BUNDLED_ALIAS,
        base_url=server.base_url,
        api_key="unused",  # type: ignore[arg-type]
        use_responses_api=True,
        temperature=0,
        max_tokens=max_tokens,  # type: ignore[call-arg]
        max_retries=0,
    )


def test_invoke(server: Server) -> None:
    reply = chat(server).invoke(PROMPT)
    assert isinstance(reply, AIMessage)
    assert reply.text.strip()
    assert reply.response_metadata["status"] == "completed"
    assert reply.response_metadata["id"].startswith("resp_")
    usage = reply.usage_metadata
    assert usage is not None and usage["output_tokens"] > 0


def test_stream(server: Server) -> None:
    chunks = list(chat(server).stream(PROMPT))
    assert chunks and all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.text.strip()


async def test_astream(server: Server) -> None:
    texts = [chunk.text async for chunk in chat(server).astream(PROMPT)]
    assert "".join(texts).strip()


def test_bind_tools_is_accepted(server: Server) -> None:
    """Tools go out in the Responses shape and the run succeeds, whatever the model does."""
    reply = chat(server).bind_tools([get_weather]).invoke("What is the weather in Paris?")
    assert isinstance(reply, AIMessage)
    assert reply.response_metadata["status"] in ("completed", "incomplete")


def test_bind_tools_forced_call(server: Server) -> None:
    """Parallel calls allowed (LangChain's default): the model's exact repeats of its call
    end the turn, so exactly one call comes back and the response is completed."""
    model = chat(server, max_tokens=48).bind_tools([get_weather], tool_choice="get_weather")
    reply = model.invoke("What is the weather in Paris?")
    assert isinstance(reply, AIMessage)
    assert reply.response_metadata["status"] == "completed"
    assert [call["name"] for call in reply.tool_calls] == ["get_weather"]
    assert isinstance(reply.tool_calls[0]["args"].get("city"), str)


def test_bind_tools_required_call_streams(server: Server) -> None:
    model = chat(server, max_tokens=48).bind_tools([get_weather], tool_choice="required")
    chunks = list(model.stream("What is the weather in Oslo?"))
    assert len(chunks) > 1 and all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    whole: Any = chunks[0]  # langchain types `+` on messages as building a prompt template
    for chunk in chunks[1:]:
        whole += chunk
    assert isinstance(whole, AIMessageChunk)
    assert whole.response_metadata["status"] == "completed"
    assert [call["name"] for call in whole.tool_calls] == ["get_weather"]
    assert isinstance(whole.tool_calls[0]["args"].get("city"), str)
