"""Where a template does not show the tools, respond describes them in the system prompt;
the call syntax that prompt asks for is the one the turn's grammar writes (_prompt.py).

The real templates of the pinned set, through the embedded engine's render path: DeepSeek
R1's Qwen distill and V3.1 show calls but not tools, so their prompt asks for DeepSeek's
call tokens (not Hermes) and their history has the calls as the grammar writes them; a
template respond knows no format for keeps the Hermes prompt its grammar writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from respond.engines._base import ChatMessage, ChatTurn, FunctionSpec, ToolCall
from respond.engines.formats import Chosen, ProbeCall, choose_format, format_named
from respond.engines.llamacpp._grammar import CallSpec, output_grammar
from respond.engines.llamacpp._prompt import render_prompt
from respond.engines.llamacpp._template import EXAMPLE_CALL, ChatTemplate
from tests.support.gbnf import accepts, bundled_vocab
from tests.support.templates import template_dir

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [FunctionSpec("get_weather", "The weather in a city.", SCHEMA)]
CALL = ToolCall("call_1", "get_weather", '{"city": "Lyon"}')
HISTORY = [
    ChatMessage("user", "Weather in Lyon?"),
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage("tool", "18 degrees and sunny", tool_call_id="call_1"),
]


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


def template(stem: str) -> ChatTemplate:
    return ChatTemplate((template_dir() / f"{stem}.jinja").read_text())


def chosen(chat: ChatTemplate) -> Chosen:
    return choose_format(
        chat.source, lambda m, t: chat.render(m, tools=t, add_generation_prompt=False)
    )


def prompt(chat: ChatTemplate, choice: Chosen) -> str:
    turn = ChatTurn(model="m", messages=HISTORY, tools=TOOLS)
    return render_prompt(chat, turn, chosen=choice)


@pytest.mark.parametrize(
    ("stem", "name"),
    [
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1"),
        ("deepseek-ai-DeepSeek-V3.1", "deepseek-v3.1"),
    ],
)
def test_a_template_that_shows_calls_but_not_tools_is_asked_for_its_own_syntax(
    vocab: Any, stem: str, name: str
) -> None:
    chat = template(stem)
    choice = chosen(chat)
    assert not chat.caps.tools and choice.format is not None and choice.format.name == name
    fmt = choice.format
    text = prompt(chat, choice)
    assert "get_weather" in text and "<tool_call>" not in text  # described, not as Hermes
    # The example the prompt gives is a call the grammar writes...
    example = fmt.render([EXAMPLE_CALL])
    assert example in text
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec(EXAMPLE_CALL.name, None)])
    assert accepts(vocab, grammar, example)
    # ... and the history shows the call as the grammar writes it, its result after it.
    written = fmt.render([ProbeCall("get_weather", {"city": "Lyon"})])
    assert written in text
    assert accepts(
        vocab, output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)]), written
    )
    assert text.index(written) < text.index("18 degrees and sunny")
    assert "<tool_response>" not in text  # the template writes the result itself


def test_a_template_whose_format_is_unknown_keeps_the_hermes_prompt(vocab: Any) -> None:
    chat = template("HuggingFaceTB-SmolLM3-3B")
    choice = chosen(chat)
    assert choice.format is None
    text = prompt(chat, choice)
    assert '<tool_call>\n{"name": "<function name>"' in text
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>' in text
    )
    assert "<tool_response>\n18 degrees and sunny\n</tool_response>" in text


def test_a_format_given_by_name_to_a_template_without_tools_is_the_prompts_syntax() -> None:
    """--chat-format on a template that shows neither tools nor calls: the prompt asks for
    that format's calls and writes the history's in it."""
    chat = template("microsoft-Phi-3.5-mini-instruct")
    fmt = format_named("qwen3-coder")
    text = prompt(chat, Chosen(fmt, None, "--chat-format"))
    assert fmt.render([EXAMPLE_CALL]) in text and '"<function name>"' not in text
    assert fmt.render([ProbeCall("get_weather", {"city": "Lyon"})]) in text
    assert "<tool_response>\n18 degrees and sunny\n</tool_response>" in text
