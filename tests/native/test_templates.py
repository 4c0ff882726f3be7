"""Every chat template of the pinned llama.cpp set renders the conversations respond sends,
and its probed caps say truly what it shows.

The templates are the real ones (tests/support/templates.py); each conversation goes
through `message_dicts` and `ChatTemplate.render` as the embedded engine sends it. Where a
template shows a thing (tool definitions, calls, results, reasoning) its text must be in the
prompt; where it does not, the caps must say so, and the prompt must not have it either.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from respond.engines._base import ChatMessage, FunctionSpec, ToolCall
from respond.engines.llamacpp._template import (
    ChatTemplate,
    fallback_tool_messages,
    message_dicts,
    tool_dicts,
)
from tests.support.templates import template_paths

SYSTEM = ChatMessage("system", "Answer in one short sentence.")
USER = ChatMessage("user", "What is the weather where I am going tomorrow?")
THANKS = ChatMessage("user", "Thanks a lot.")
# Call ids in respond's own shape (call_ and 48 hex digits), which Mistral's templates refuse.
ID_1 = "call_" + "5f" * 24
ID_2 = "call_" + "a3" * 24
WEATHER = ToolCall(ID_1, "get_weather", '{"city": "Lyon"}')
TIME = ToolCall(ID_2, "get_local_time", '{"zone": "Europe/Zurich"}')
RESULT_1 = "18 degrees and sunny"
RESULT_2 = "half past three"
ANSWER = "Pack your sunglasses."
THOUGHT = "The forecast tool answers this; call it first."
OLD_THOUGHT = "A greeting needs no tool at all."

TOOLS = [
    FunctionSpec(
        "get_weather",
        "The weather forecast for a city.",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
        },
    ),
    # No descriptions: what many clients send (Command R+'s template prints them).
    FunctionSpec(
        "get_local_time",
        None,
        {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
    ),
]


def called(*calls: ToolCall, reasoning: str | None = None) -> ChatMessage:
    return ChatMessage("assistant", "", tool_calls=calls, reasoning=reasoning)


def result(call: ToolCall, content: str) -> ChatMessage:
    return ChatMessage("tool", content, tool_call_id=call.call_id)


CALL_HISTORY = [SYSTEM, USER, called(WEATHER), result(WEATHER, RESULT_1)]
ANSWERED = [*CALL_HISTORY, ChatMessage("assistant", ANSWER), THANKS]
PARALLEL = [
    SYSTEM,
    USER,
    called(WEATHER, TIME),
    result(WEATHER, RESULT_1),
    result(TIME, RESULT_2),
    ChatMessage("assistant", ANSWER),
    THANKS,
]

PATHS = template_paths()


@functools.cache
def template(path: Path) -> ChatTemplate:
    return ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")


def render(path: Path, messages: list[ChatMessage], tools: bool = False) -> str:
    """The prompt as the engine makes it: with the tools where the template shows them,
    else with respond's Hermes fallback (tools described in the system prompt, calls and
    results as Hermes text), as for a template whose format is unknown (the prompt of a
    known format is tests/native/test_tools_prompt.py's)."""
    chat = template(path)
    if not tools:
        return chat.render(message_dicts(messages))
    if chat.caps.tools:
        return chat.render(message_dicts(messages), tools=tool_dicts(TOOLS))
    return chat.render(message_dicts(fallback_tool_messages(messages, TOOLS)))


def shows_calls(path: Path) -> bool:
    """Calls and results show: in the template's own syntax, or in the fallback's."""
    caps = template(path).caps
    return caps.tool_calls or not caps.tools


def shows_results(path: Path) -> bool:
    caps = template(path).caps
    return caps.tool_results or not caps.tools


def test_the_whole_set_is_there() -> None:
    assert len(PATHS) == 71


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_a_plain_chat_with_a_system_message(path: Path) -> None:
    text = render(path, [SYSTEM, USER])
    assert USER.content in text
    # In a system turn, or merged into the user's when the template has no system role.
    assert SYSTEM.content in text


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_two_tools_show_where_the_caps_say(path: Path) -> None:
    chat = template(path)
    text = chat.render(message_dicts([SYSTEM, USER]), tools=tool_dicts(TOOLS))
    assert USER.content in text
    assert [tool.name in text for tool in TOOLS] == [chat.caps.tools] * 2
    # Where the template does not show them, respond does.
    fallback = render(path, [SYSTEM, USER], tools=True)
    assert all(tool.name in fallback for tool in TOOLS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_a_call_its_result_and_the_answer(path: Path) -> None:
    text = render(path, ANSWERED, tools=True)
    assert ("Lyon" in text) == shows_calls(path)
    assert (RESULT_1 in text) == shows_results(path)
    assert THANKS.content in text


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_the_round_trip_prompt(path: Path) -> None:
    caps = template(path).caps
    text = render(path, CALL_HISTORY, tools=True)
    assert ("Lyon" in text) == shows_calls(path)
    assert (RESULT_1 in text) == shows_results(path)
    # The calls' ids, where the template writes them, in the shape it accepts.
    assert (ID_1 in text) == (caps.tools and caps.call_ids_shown and caps.call_id == "any")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_two_parallel_calls(path: Path) -> None:
    text = render(path, PARALLEL, tools=True)
    # Both, in one message or (a template that takes one call per message) one by one.
    assert ("Lyon" in text, "Europe/Zurich" in text) == (shows_calls(path),) * 2
    assert (RESULT_1 in text, RESULT_2 in text) == (shows_results(path),) * 2


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_reasoning_in_the_turn_and_in_history(path: Path) -> None:
    caps = template(path).caps
    if caps.tools and caps.tool_calls:  # the call loop
        thinking = [SYSTEM, USER, called(WEATHER, reasoning=THOUGHT), result(WEATHER, RESULT_1)]
        text = render(path, thinking, tools=True)
    else:  # the turn's answer, last
        thinking = [SYSTEM, USER, ChatMessage("assistant", ANSWER, reasoning=THOUGHT)]
        text = render(path, thinking)
    assert (THOUGHT in text) == caps.reasoning_in_turn
    history = [
        SYSTEM,
        ChatMessage("user", "Hello."),
        ChatMessage("assistant", "Hello!", reasoning=OLD_THOUGHT),
        USER,
    ]
    assert (OLD_THOUGHT in render(path, history)) == caps.reasoning_in_history
    if caps.reasoning_in_turn or caps.reasoning_in_history:
        assert caps.reasoning_key is not None


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_the_caps_are_stable(path: Path) -> None:
    """Probed again from the same source, the same caps (no clock or order in them)."""
    again = ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")
    assert again.caps == template(path).caps
