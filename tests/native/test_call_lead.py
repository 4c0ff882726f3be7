"""What a template's history writes between a forced turn's prompt and its calls, and the
grammar that has the model write exactly that (engines/llamacpp/_prompt.py's call_lead,
_decoding.py, _grammar.py).

For every template of the pinned set, a forced turn (a system message, a question, a
required function): where a lead is found, the forced grammar accepts it followed by the
calls, and the history of that turn (the conversation with the turn after it, as the next
prompt renders it) is the prompt, then the lead, then the calls; with reasoning, the same
for what the history writes around a reasoning text. The templates without a lead, or
without one for a turn that does not reason, are named with why (exact: a template that
gains or loses one fails). The parsers read a lead as markup: whitespace before a turn's
first call is not text, and a reasoning text is kept without the whitespace around it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from respond.engines import _base as d
from respond.engines.formats import HERMES, PROBE, THINK_TAGS, ChatFormat, choose_format
from respond.engines.formats._families import FORMATS
from respond.engines.llamacpp._decoding import DecodingPlan, plan_decoding
from respond.engines.llamacpp._prompt import call_lead, render_prompt
from respond.engines.llamacpp._template import ChatTemplate
from tests.support.gbnf import accepts, bundled_vocab
from tests.support.templates import template_paths

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
REASONING = "It rains in Paris."
STEMS = [path.stem for path in template_paths()]

OPENED = "its generation prompt opens the reasoning block, which its history leaves out"
# Templates whose history holds no turn of calls after the prompt, and why.
NO_LEAD = {
    "Apriel-1.6-15b-Thinker-fixed": OPENED,
    "CohereForAI-c4ai-command-r-plus-tool_use": "its generation prompt adds a system turn",
    "NVIDIA-Nemotron-Nano-v2": OPENED,
    "Qwen-QwQ-32B": OPENED,
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": OPENED,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": OPENED,
    "llama-cpp-deepseek-r1": OPENED,
    "deepseek-ai-DeepSeek-V3.2": "its history writes the prompt's closed block as </think>",
    "google-gemma-4-31B-it": "its generation prompt holds an empty thought channel",
    "google-gemma-4-31B-it-interleaved": "its generation prompt holds an empty thought channel",
    "mistralai-Mistral-Nemo-Instruct-2407": "its system message moves to the last user turn",
}
# Templates whose history of a turn of calls alone leaves out the reasoning block the
# prompt opened: there, the forced grammar has the model reason first (the history then
# holds the turn as written).
REASONS_FIRST = {
    "Cohere2MoE",
    "GLM-4.7-Flash",
    "MiniMax-M2",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "Spark2.5",
}


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


@dataclasses.dataclass
class Forced:
    template: ChatTemplate
    fmt: ChatFormat
    turn: d.ChatTurn
    prompt: str
    plan: DecodingPlan

    def history(self, message: d.ChatMessage) -> str:
        """The next turn's prompt: the conversation, `message` as the forced turn, the
        result of its call."""
        chosen = choose_format(self.template.source, _render(self.template))
        result = d.ChatMessage("tool", "rainy", tool_call_id=CALL.call_id)
        turn = dataclasses.replace(self.turn, messages=[*self.turn.messages, message, result])
        return render_prompt(self.template, turn, chosen=chosen)


def _render(template: ChatTemplate) -> Any:
    return lambda messages, tools: template.render(
        messages, tools=tools, add_generation_prompt=False
    )


def forced(stem: str) -> Forced:
    path = next(p for p in template_paths() if p.stem == stem)
    template = ChatTemplate(path.read_text())
    logging.disable(logging.WARNING)  # detection's notes on parallel calls
    try:
        chosen = choose_format(template.source, _render(template))
    finally:
        logging.disable(logging.NOTSET)
    fmt = chosen.format or HERMES
    turn = d.ChatTurn(
        model="m",
        messages=[
            d.ChatMessage("system", "You help travellers."),
            d.ChatMessage("user", "What is the weather in Paris this week?"),
        ],
        tools=[d.FunctionSpec("get_weather", "Weather in a city", SCHEMA, strict=True)],
        tool_choice=d.ToolChoice("required"),
        parallel_tool_calls=False,
        max_output_tokens=320,
    )
    prompt = render_prompt(template, turn, chosen=chosen)
    lead = call_lead(template, turn, chosen=chosen, prompt=prompt)
    plan = plan_decoding(turn, fmt, chosen.think, prompt[-64:], lead)
    return Forced(template, fmt, turn, prompt, plan)


CALL = d.ToolCall(PROBE.call_id or "", PROBE.name, json.dumps(PROBE.arguments))


@pytest.mark.parametrize("stem", STEMS)
def test_the_forced_grammar_writes_what_the_history_holds(vocab: Any, stem: str) -> None:
    case = forced(stem)
    lead, grammar = case.plan.lead, case.plan.grammar
    assert grammar is not None
    assert (lead is None) == (stem in NO_LEAD), lead
    if lead is None:
        return
    calls = case.fmt.render([PROBE])
    assert (lead.bare is None) == (stem in REASONS_FIRST), lead
    if lead.bare is not None:
        written = lead.bare + calls
        assert accepts(vocab, grammar, written), (written, grammar)
        alone = d.ChatMessage("assistant", tool_calls=(CALL,))
        assert case.history(alone).startswith(case.prompt + written)
    if lead.around is not None:
        pre, post = lead.around
        written = pre + REASONING + post + calls
        assert accepts(vocab, grammar, written), (written, grammar)
        reasoned = d.ChatMessage("assistant", tool_calls=(CALL,), reasoning=REASONING)
        assert case.history(reasoned).startswith(case.prompt + written)


def test_a_lead_is_found_where_a_template_writes_one() -> None:
    """Not only empty ones: the line break Bielik writes before its calls, the empty
    reasoning block GLM-4.6 writes, the close of the block Qwen3.5's prompt opened; and
    Qwen3's empty block only where its turn is the conversation's last, not in the next
    prompt, where the call's result follows it."""
    leads = {stem: forced(stem).plan.lead for stem in ("Bielik-11B-v3.0-Instruct", "GLM-4.6")}
    assert {stem: lead.bare for stem, lead in leads.items() if lead} == {
        "Bielik-11B-v3.0-Instruct": "\n",
        "GLM-4.6": "\n<think></think>\n",
    }
    qwen = forced("Qwen3.5-4B").plan.lead
    assert qwen is not None and qwen.bare == "\n</think>\n\n"
    qwen3 = forced("Qwen-Qwen3-0.6B").plan.lead
    assert qwen3 is not None and qwen3.bare == ""


def test_an_auto_turn_gets_no_lead() -> None:
    """Under "auto" the model writes what comes before its calls itself; after a rewind
    the call's grammar starts at the call's markup."""
    case = forced("Bielik-11B-v3.0-Instruct")
    auto = dataclasses.replace(case.turn, tool_choice=d.ToolChoice("auto"))
    plan = plan_decoding(auto, case.fmt, THINK_TAGS, case.prompt[-64:], case.plan.lead)
    assert plan.lead is None and plan.grammar is None and plan.call_grammar is not None


# ---------------------------------------------------------------- the parsers

# One format of each parser: the JSON formats' (engines/_parsing.py), the markup formats'.
PARSED = [HERMES, next(f for f in FORMATS if f.name == "qwen3-coder")]


def parse(fmt: ChatFormat, text: str, *, inside: bool = False, size: int = 1) -> list[d.Delta]:
    parser = fmt.parser(
        tools={PROBE.name: None},
        think=THINK_TAGS,
        in_reasoning=inside,
        new_call_id=lambda: "call_1",
        stop_at_call=False,
    )
    out: list[d.Delta] = []
    for start in range(0, len(text), size):
        out += parser.feed(text[start : start + size])
    return out + parser.close()


def said(deltas: list[d.Delta]) -> tuple[str, str, list[str]]:
    text = "".join(x.text for x in deltas if isinstance(x, d.TextDelta))
    reasoning = "".join(x.text for x in deltas if isinstance(x, d.ReasoningDelta))
    return text, reasoning, [x.name for x in deltas if isinstance(x, d.ToolCallStart)]


@pytest.mark.parametrize("fmt", PARSED, ids=lambda f: f.name)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_whitespace_before_the_first_call_is_markup(fmt: ChatFormat, size: int) -> None:
    for lead in ("\n", " ", "\n\n", "\n<think></think>\n"):
        deltas = parse(fmt, lead + fmt.render([PROBE]), size=size)
        assert said(deltas) == ("", "", [PROBE.name]), (lead, deltas)


@pytest.mark.parametrize("fmt", PARSED, ids=lambda f: f.name)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_reasoning_is_kept_without_the_whitespace_around_it(fmt: ChatFormat, size: int) -> None:
    text = "<think>\n  It rains.\n\nSo: umbrella. \n</think>\n\nTake one."
    assert said(parse(fmt, text, size=size)) == ("Take one.", "It rains.\n\nSo: umbrella.", [])
    opened = "\nIt rains.\n</think>\n\n" + fmt.render([PROBE])
    assert said(parse(fmt, opened, inside=True, size=size)) == ("", "It rains.", [PROBE.name])


@pytest.mark.parametrize("fmt", PARSED, ids=lambda f: f.name)
def test_an_answer_keeps_its_whitespace_and_blank_output_says_nothing(fmt: ChatFormat) -> None:
    assert said(parse(fmt, " Hello,\n world.")) == (" Hello,\n world.", "", [])
    assert parse(fmt, "\n \n") == []
