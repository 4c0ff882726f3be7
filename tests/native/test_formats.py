"""Each family's format against the real templates of the pinned set (tests/support/templates).

For every template that renders a probe call: detection picks the expected format; the
format writes a call exactly as the template renders it (so the next turn's prompt cache
covers a generated call); the parser reads the template's rendering back into the same
calls, fed in chunks of any size; and that rendering is in the grammar's language.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from respond.engines import _base as d
from respond.engines.formats import (
    FORMATS,
    ChatFormat,
    ProbeCall,
    Think,
    effort_variables,
    format_named,
    probe_messages,
)
from respond.engines.formats._stream import MarkupParser
from respond.engines.llamacpp._grammar import CallSpec, output_grammar
from tests.support.gbnf import accepts, bundled_vocab
from tests.support.template_formats import chosen as detected
from tests.support.template_formats import template
from tests.support.templates import template_dir

# Template (file stem) -> the format its rendering of a probe call shows.
EXPECTED = {
    "Apertus-8B-Instruct": "apertus",
    "Apriel-1.6-15b-Thinker-fixed": "apriel",
    "Bielik-11B-v3.0-Instruct": "hermes",
    "ByteDance-Seed-OSS": "seed-oss",
    "Cohere2MoE": "command-r7b",
    "CohereForAI-c4ai-command-r-plus-tool_use": "command-r-plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command-r7b",
    "GLM-4.6": "glm-4.5",
    "GLM-4.7-Flash": "glm-4.7",
    "GigaChat3-10B-A1.8B": "gigachat-3",
    "GigaChat3.1-10B-A1.8B": "gigachat-3.1",
    "Kimi-K2-Instruct": "kimi-k2",
    "Kimi-K2-Thinking": "kimi-k2",
    "Kimi-K3": "kimi-k3",
    "LFM2.5-8B-A1B": "lfm2.5",
    "MiMo-VL": "hermes",
    "MiniMax-M1": "minimax-m1",
    "MiniMax-M2": "minimax-m2",
    "MiniMax-M3": "minimax-m3",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "qwen3-coder",
    "NVIDIA-Nemotron-Nano-v2": "nemotron-v2",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "hermes",
    "Qwen-QwQ-32B": "hermes",
    "Qwen-Qwen2.5-7B-Instruct": "hermes",
    "Qwen-Qwen3-0.6B": "hermes",
    "Qwen3-Coder": "qwen3-coder",
    "Qwen3.5-4B": "qwen3-coder",
    "Reka-Edge": "reka",
    "Spark2.5": "glm-4.7",
    "StepFun3.5-Flash": "stepfun",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.1": "deepseek-v3.1",
    "deepseek-ai-DeepSeek-V3.2": "deepseek-v3.2",
    "deepseek-ai-DeepSeek-V4-Flash-0731": "deepseek-v4",
    "deepseek-ai-DeepSeek-V4": "deepseek-v4",
    "fireworks-ai-llama-3-firefunction-v2": "firefunction-v2",
    "ibm-granite-granite-4.0": "hermes",
    "ibm-granite-granite-4.1": "hermes",
    "inclusionai-ling-3.0-flash": "ling-3",
    "llama-cpp-deepseek-r1": "deepseek-r1",
    "llm-jp-llm-jp-4.1-8b-thinking": "harmony-constrain",
    "meetkai-functionary-medium-v3.1": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2": "functionary-v3.2",
    "meta-llama-Llama-3.1-8B-Instruct": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3",
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral-v11",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral-nemo",
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral-v13",
    "moonshotai-Kimi-K2": "kimi-k2",
    "muse-glimmer": "muse-glimmer",
    "openbmb-MiniCPM5-1B": "minicpm5",
    "google-gemma-4-31B-it": "gemma-4",
    "google-gemma-4-31B-it-interleaved": "gemma-4",
    "openai-gpt-oss-120b": "gpt-oss",
    "poolside-Laguna-S-2.1": "glm-4.7",
    "poolside-Laguna-XS-2.1": "glm-4.5",
    "poolside-Laguna-XS.2": "glm-4.5",
    "tencent-Hy3": "hunyuan-3",
    "unsloth-Apriel-1.5": "apriel",
    "unsloth-mistral-Devstral-Small-2507": "mistral-v11",
    "upstage-Solar-Open-100B": "solar-open",
}
# The templates whose tool-call format respond does not know (they get the Hermes fallback
# prompt), and why; docs/models.md says the same.
FALLBACK = {
    # Templates that render no tool calls at all.
    "HuggingFaceTB-SmolLM3-3B",
    "LFM2-8B-A1B",
    "LFM2.5-Instruct",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "google-gemma-2-2b-it",
    "ibm-granite-granite-3.3-2B-Instruct",
    "llama-cpp-rwkv-world",
    "microsoft-Phi-3.5-mini-instruct",
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "metric": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                           "parameters": SCHEMA}}]  # fmt: skip
CALLS = [
    ProbeCall("get_weather", {"city": "Paris, <b>France</b>\nand more", "days": 2, "metric": True}),
    ProbeCall("get_weather", {"city": "Köln", "tags": ["a", 'b "c"']}),
]


def rendered(stem: str, calls: list[ProbeCall], reasoning: str | None = None) -> str:
    chat = template(stem)
    for string_arguments in (False, True):
        try:
            messages = probe_messages(calls, string_arguments=string_arguments)
            if reasoning is not None:
                messages[1]["reasoning_content"] = reasoning
            return chat.render(messages, tools=TOOLS, add_generation_prompt=False)
        except Exception:
            continue
    pytest.fail(f"{stem} does not render a probe call")


def chosen(stem: str) -> ChatFormat | None:
    return detected(stem).format


def calls_for(fmt: ChatFormat) -> list[ProbeCall]:
    if fmt.name == "seed-oss":
        # Seed-OSS's template writes a list or object argument as Python would print it
        # (['a']): not JSON, and not written canonically by respond (docs/models.md).
        return [CALLS[0], ProbeCall("get_weather", {"city": "Köln", "days": 3}, "call00001")]
    if fmt.name == "reka":
        # Reka Edge's template escapes non-ASCII characters (tojson(ensure_ascii=True));
        # respond writes them as they are (docs/models.md).
        return [CALLS[0], ProbeCall("get_weather", {"city": "Koln", "tags": ["a", 'b "c"']})]
    return CALLS[:1] if fmt.single else CALLS


CASES = sorted(EXPECTED.items())


@pytest.mark.parametrize(("stem", "name"), CASES)
def test_detection_reads_the_format_off_the_rendered_template(stem: str, name: str) -> None:
    found = chosen(stem)
    assert found is not None and found.name == name


@pytest.mark.parametrize(("stem", "name"), CASES)
def test_the_format_writes_calls_as_the_template_renders_them(stem: str, name: str) -> None:
    fmt = format_named(name)
    calls = calls_for(fmt)
    assert fmt.render(calls) in rendered(stem, calls)


def parse(fmt: ChatFormat, text: str, size: int, think: Think | None = None,
          stop_at_call: bool = False) -> list[d.Delta]:  # fmt: skip
    ids = itertools.count()
    parser = fmt.parser(
        tools={"get_weather": SCHEMA},
        think=think,
        in_reasoning=False,
        new_call_id=lambda: f"call_{next(ids)}",
        stop_at_call=stop_at_call,
    )
    out: list[d.Delta] = []
    for start in range(0, len(text), size):
        out += parser.feed(text[start : start + size])
    return out + parser.close()


def summary(deltas: list[d.Delta]) -> tuple[str, str, list[tuple[str, Any]]]:
    text = "".join(x.text for x in deltas if isinstance(x, d.TextDelta))
    reasoning = "".join(x.text for x in deltas if isinstance(x, d.ReasoningDelta))
    calls: list[tuple[str, Any]] = []
    arguments: list[str] = []
    for delta in deltas:
        if isinstance(delta, d.ToolCallStart):
            calls.append((delta.name, None))
            arguments = []
        elif isinstance(delta, d.ToolCallArgumentsDelta):
            arguments.append(delta.arguments)
        elif isinstance(delta, d.ToolCallEnd):
            calls[-1] = (calls[-1][0], json.loads("".join(arguments)))
    return text, reasoning, calls


def expected(calls: list[ProbeCall]) -> list[tuple[str, Any]]:
    return [(c.name, dict(c.arguments)) for c in calls]


# Templates that write a call's reasoning in their family's own markup, right before the call.
OWN_REASONING = {"muse-glimmer": "muse-glimmer", "MiniMax-M3": "minimax-m3"}


@pytest.mark.parametrize(("stem", "name"), sorted(OWN_REASONING.items()))
def test_reasoning_before_a_call_is_written_as_the_template_writes_it(stem: str, name: str) -> None:
    fmt = format_named(name)
    assert fmt.think is not None
    text = fmt.think.open + "plan < it" + fmt.think.close + fmt.render(CALLS)
    assert text in rendered(stem, CALLS, reasoning="plan < it")
    parsed = summary(parse(fmt, text, 3, think=fmt.think))
    assert parsed == ("", "plan < it", expected(CALLS))


def test_one_state_machine_reads_every_format() -> None:
    """What differs between the formats is data (Markup, ParseOptions), or a reader's hook
    on the one machine."""
    for fmt in FORMATS:
        parser = fmt.parser(tools={}, think=None, in_reasoning=False, new_call_id=str,
                            stop_at_call=False)  # fmt: skip
        assert type(parser) is MarkupParser, fmt.name


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_parse_of_render_is_the_calls(fmt: ChatFormat, size: int) -> None:
    calls = calls_for(fmt)
    text, reasoning, parsed = summary(parse(fmt, fmt.render(calls), size))
    assert parsed == expected(calls)
    assert text.strip() == "" and reasoning == ""


@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_text_and_reasoning_around_a_call(fmt: ChatFormat, size: int) -> None:
    think: Think | None = fmt.think or Think("<think>", "</think>", "think tags")
    assert think is not None
    calls = calls_for(fmt)
    body = fmt.render(calls)
    if fmt.name == "llama3":  # a Llama 3 call is the whole turn: no words before it
        raw, words = think.open + "plan < it" + think.close + body, ""
    elif fmt.name == "functionary-v3.2":  # no reasoning markup; the words are a message
        raw, words = with_words(fmt, "Let me look. ", body), "Let me look. "
        think = None
    else:
        raw, words = (
            think.open + "plan < it" + think.close + "Let me look. " + body,
            "Let me look. ",
        )
    text, reasoning, parsed = summary(parse(fmt, raw, size, think=think))
    assert reasoning == ("plan < it" if think else "")
    assert text.strip() == words.strip()
    assert parsed == expected(calls)


@pytest.mark.parametrize("size", [1, 1000])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_call_cut_inside_its_arguments_ends_with_generation(fmt: ChatFormat, size: int) -> None:
    """Generation that stops inside a call's arguments (the token limit) leaves the call
    open: its end says so (`at_end`), and the run makes it incomplete, not a whole call."""
    body = fmt.render(CALLS[:1])
    cut = body[: body.index("Paris") + 3]
    out = parse(fmt, cut, size)
    starts = [x for x in out if isinstance(x, d.ToolCallStart)]
    ends = [x for x in out if isinstance(x, d.ToolCallEnd)]
    if not starts:  # a format that names the function after its arguments: no call at all
        assert ends == []
        return
    assert ends == [d.ToolCallEnd(at_end=True)]


def with_words(fmt: ChatFormat, words: str, body: str) -> str:
    """A turn of `words`, then the calls `body` writes."""
    if fmt.name == "functionary-v3.2":  # words are a message to `all`, after the prompt's >>>
        return "all\n" + words + ">>>" + body
    return words + body


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.name != "llama3"], ids=lambda f: f.name)
def test_stop_at_call_halts_where_the_call_markup_begins(fmt: ChatFormat) -> None:
    ids = itertools.count()
    parser = fmt.parser(tools={"get_weather": SCHEMA}, think=None, in_reasoning=False,
                        new_call_id=lambda: f"c{next(ids)}", stop_at_call=True)  # fmt: skip
    words = "Sure. "
    raw = with_words(fmt, words, fmt.render(CALLS[:1]))
    out: list[d.Delta] = []
    for char in raw:
        out += parser.feed(char)
    assert "".join(x.text for x in out if isinstance(x, d.TextDelta)) == words
    assert parser.halted_at is not None
    assert raw[parser.halted_at :].strip().startswith(fmt.render(CALLS[:1]).strip()[:4])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_without_tools_call_markup_is_text(fmt: ChatFormat) -> None:
    parser = fmt.parser(tools=None, think=None, in_reasoning=False, new_call_id=lambda: "c",
                        stop_at_call=False)  # fmt: skip
    body = "x " + fmt.render(CALLS[:1])
    out = parser.feed(body) + parser.close()
    assert not any(isinstance(x, d.ToolCallStart) for x in out)


# ---------------------------------------------------------------- grammars


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_rendered_calls_are_in_the_grammars_language(vocab: Any, fmt: ChatFormat) -> None:
    calls = calls_for(fmt)
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])
    assert accepts(vocab, grammar, fmt.render(calls)), grammar
    one = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)], max_calls=1)
    assert accepts(vocab, one, fmt.render(calls[:1]))
    if len(calls) > 1:
        assert not accepts(vocab, one, fmt.render(calls))


@pytest.mark.parametrize(
    "fmt", [f for f in FORMATS if '["a", ' in f.render(CALLS[1:])], ids=lambda f: f.name
)
def test_the_grammar_writes_json_as_tojson_does(vocab: Any, fmt: ChatFormat) -> None:
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])
    spaced = fmt.render(CALLS[1:]).replace('["a", ', '[ "a",  ')
    assert spaced != fmt.render(CALLS[1:])
    assert not accepts(vocab, grammar, spaced)


def test_a_value_may_hold_markup_but_not_the_marker_that_ends_it(vocab: Any) -> None:
    fmt = format_named("qwen3-coder")
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])
    html = ProbeCall("get_weather", {"city": "<p>a</p> </param> <</parameter"})
    assert accepts(vocab, grammar, fmt.render([html]))
    broken = ProbeCall("get_weather", {"city": "a\n</parameter>\nb"})
    assert not accepts(vocab, grammar, fmt.render([broken]))


def test_reasoning_effort_reaches_the_variables_templates_take() -> None:
    def source(stem: str) -> str:
        return (template_dir() / f"{stem}.jinja").read_text()

    assert effort_variables(source("openai-gpt-oss-120b"), "high") == {"reasoning_effort": "high"}
    assert effort_variables(source("Qwen-Qwen3-0.6B"), "none") == {"enable_thinking": False}
    assert effort_variables(source("deepseek-ai-DeepSeek-V3.1"), "low")["thinking"] is True
    assert effort_variables(source("Qwen3-Coder"), "high") == {}
    assert effort_variables(source("Qwen-Qwen3-0.6B"), None) == {}
    assert effort_variables(source("Kimi-K3"), "none") == {"thinking": False}
    assert effort_variables(source("Kimi-K3"), "xhigh") == {
        "thinking": True,
        "thinking_effort": "max",
    }
    kimi = template("Kimi-K3")
    for effort in ("minimal", "low", "medium", "high", "xhigh"):  # each one the template takes
        extra = effort_variables(kimi.source, effort)
        prompt = kimi.render([{"role": "user", "content": "hi"}], **extra)
        assert f"thinking_effort={extra['thinking_effort']}" in prompt


def test_every_template_of_the_set_is_in_the_table_or_known_to_fall_back() -> None:
    stems = {Path(p).stem for p in template_dir().glob("*.jinja")}
    assert set(EXPECTED) | FALLBACK == stems
    assert not set(EXPECTED) & FALLBACK


def test_exactly_the_known_templates_fall_back_to_the_hermes_prompt() -> None:
    stems = {Path(p).stem for p in template_dir().glob("*.jinja")}
    assert {stem for stem in stems if chosen(stem) is None} == FALLBACK


# Every family with reasoning markup of its own, and one of the plain <think> ones.
THINKING = [format_named("deepseek-r1"), *(f for f in FORMATS if f.think is not None)]


@pytest.mark.parametrize("fmt", THINKING, ids=lambda f: f.name)
def test_reasoning_before_a_forced_call_is_bounded(vocab: Any, fmt: ChatFormat) -> None:
    """A model whose prompt opened a reasoning block must still come to the forced call:
    the grammar lets it reason up to the limit, then only closes the block."""
    think = fmt.think or Think("<think>", "</think>", "think tags", gap="[ \\n]*")
    # What the family writes between the block and its calls: a GBNF literal (Kimi K3's
    # response channel), else whitespace the grammar may skip.
    gap = json.loads(think.gap) if think.gap.startswith('"') else ""
    call = gap + fmt.render(CALLS[:1])

    def grammar(limit: int | None) -> str:
        return output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)],
                              think="inside", think_markup=think, think_limit=limit)  # fmt: skip

    assert accepts(vocab, grammar(40), "a" * 40 + think.close + call)
    assert not accepts(vocab, grammar(40), "a" * 41 + think.close + call)
    assert accepts(vocab, grammar(None), "a" * 41 + think.close + call)


@pytest.mark.parametrize("size", [1, 4, 1000])
@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("mistral-v13", "[CALL_ID]a1B2c3D4e[ARGS]"),  # before the arguments
        ("solar-open", "<|tool_call:begin|>a1B2c3D4e<|tool_call:name|>"),  # before the name
        ("mistral-nemo", '"id": "a1B2c3D4e"}'),  # after the arguments
        ("apriel", '"id": "a1B2c3D4e"}'),
    ],
)
def test_a_call_id_the_model_writes_is_the_calls_id(name: str, written: str, size: int) -> None:
    fmt = format_named(name)
    calls = [ProbeCall("get_weather", {"city": "Rome"}, "a1B2c3D4e"),
             ProbeCall("get_weather", {"city": "Oslo"}, "Z9y8X7w6V")]  # fmt: skip
    text = fmt.render(calls)
    assert written in text
    deltas = parse(fmt, text, size)
    starts = [x for x in deltas if isinstance(x, d.ToolCallStart)]
    assert [(s.call_id, s.name) for s in starts] == [
        ("a1B2c3D4e", "get_weather"),
        ("Z9y8X7w6V", "get_weather"),
    ]
    assert summary(deltas)[2] == expected(calls)


@pytest.mark.parametrize("size", [1, 1000])
def test_an_id_written_after_the_arguments_holds_the_call_back_until_it_is_read(
    size: int,
) -> None:
    fmt = format_named("mistral-nemo")
    text = fmt.render([ProbeCall("get_weather", {"city": "Rome"}, "a1B2c3D4e")])
    ids = itertools.count()
    parser = fmt.parser(tools={"get_weather": SCHEMA}, think=None, in_reasoning=False,
                        new_call_id=lambda: f"c{next(ids)}", stop_at_call=False)  # fmt: skip
    cut = text.index('"id"')
    before = []
    for start in range(0, cut, size):
        before += parser.feed(text[start : min(start + size, cut)])
    assert before == []  # nothing of the call until its id
    after = parser.feed(text[cut:]) + parser.close()
    assert after == [
        d.ToolCallStart(call_id="a1B2c3D4e", name="get_weather"),
        d.ToolCallArgumentsDelta('{"city": "Rome"}'),
        d.ToolCallEnd(),
    ]


@pytest.mark.parametrize("value", [None, "s", 2.5, [1, "a"], {"k": True}])
def test_kimi_k3_writes_the_type_of_a_value_its_schema_leaves_open(vocab: Any, value: Any) -> None:
    fmt = format_named("kimi-k3")
    call = ProbeCall("f", {"x": value})
    text = fmt.render([call])
    assert 'key="x" type="' in text
    for schema in ({"type": "object", "properties": {"x": {}}}, None):
        grammar = output_grammar(chat_format=fmt, calls=[CallSpec("f", schema)])
        assert accepts(vocab, grammar, text), grammar
    assert summary(parse(fmt, text, 2))[2] == [("f", {"x": value})]


def test_cohere_numbers_its_calls_in_the_turn() -> None:
    fmt = format_named("command-r7b")
    text = fmt.render(CALLS)
    assert '{"tool_call_id": "0", "tool_name": "get_weather"' in text
    assert '{"tool_call_id": "1", "tool_name": "get_weather"' in text
    assert summary(parse(fmt, text, 3))[2] == expected(CALLS)


def test_gemma_writes_its_own_values_sorted_and_reads_them_back() -> None:
    fmt = format_named("gemma-4")
    call = ProbeCall("f", {"b": [1, {"y": None, "x": "s"}], "a": True, "c": 2.5})
    text = fmt.render([call])
    assert text == '<|tool_call>call:f{a:true,b:[1,{x:<|"|>s<|"|>,y:None}],c:2.5}<tool_call|>'
    assert summary(parse(fmt, text, 3))[2] == [("f", dict(call.arguments))]


def test_muse_glimmer_names_the_function_twice_and_answers_in_its_own_message(vocab: Any) -> None:
    fmt = format_named("muse-glimmer")
    call = fmt.render(CALLS[:1])
    assert call.count("get_weather") == 2
    specs = [CallSpec("get_weather", SCHEMA), CallSpec("get_time", None)]
    grammar = output_grammar(chat_format=fmt, calls=specs)
    assert accepts(vocab, grammar, call)
    other = call.replace('invoke name="get_weather"', 'invoke name="get_time"')
    assert not accepts(vocab, grammar, other)
    turn = " to=user<|message|>Sure.<|eom|><|start|>assistant" + call
    for size in (1, 4, 1000):
        assert summary(parse(fmt, turn, size)) == ("Sure.", "", expected(CALLS[:1]))


# A schema with every kind of value, and per format a call of tricky values as the format's
# syntax can hold them (strings with markup, quotes, line breaks, non-ASCII; numbers,
# booleans, null; nested lists and objects): the template renders the format's text, the
# grammar writes it, the parser reads it back.
WIDE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "maybe": {"type": ["string", "null"]},
        "items": {"type": "array", "items": {"type": "string"}},
        "where": {
            "type": "object",
            "properties": {
                "lat": {"type": "number"},
                "names": {"type": "array", "items": {"type": "string"}},
                "inner": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            },
            "required": ["lat"],
        },
    },
    "required": ["text"],
}
WIDE_TOOLS = [{"type": "function", "function": {"name": "f", "description": "d",
                                                "parameters": WIDE}}]  # fmt: skip
TRICKY: dict[str, tuple[str, list[ProbeCall]]] = {
    "minicpm5": (
        "openbmb-MiniCPM5-1B",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\nnext', "count": -3, "ratio": 2.5,
                            "flag": False, "maybe": None,
                            "items": ["it's", 'say "hi"', "Köln\n", ""],
                            "where": {"lat": -0.125, "names": [], "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "plain, ünïcode", "maybe": "x"}),
        ],
    ),
    "lfm2.5": (
        "LFM2.5-8B-A1B",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\n(next) ünï', "count": -3, "ratio": 2.5,
                            "flag": False, "maybe": None,
                            "items": ["it's", 'say "hi"', "Köln\n", ""],
                            "where": {"lat": -0.125, "names": ["a", 'b "c"'],
                                      "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "", "maybe": "x"}),
        ],
    ),
    "functionary-v3.2": (
        "meetkai-functionary-medium-v3.2",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\n>>>next ünï', "count": -3, "ratio": 2.5,
                            "flag": False, "maybe": None, "items": ["a", 'b "c"', ""],
                            "where": {"lat": -0.125, "names": [], "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "", "maybe": "x"}),
        ],
    ),
    "muse-glimmer": (
        "muse-glimmer",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\n to=next ünï', "count": -3,
                            "ratio": 2.5, "flag": False, "maybe": None,
                            "items": ["a", 'b "c"', ""],
                            "where": {"lat": -0.125, "names": [], "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "", "maybe": "x"}),
        ],
    ),
    "minimax-m3": (  # a null is left out, as the template leaves it out
        "MiniMax-M3",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\n</text>next ünï', "count": -3,
                            "ratio": 2.5, "flag": False, "maybe": "2",
                            "items": ["a", 'b "c"', "", "item"],
                            "where": {"lat": -0.125, "names": [], "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "", "where": {"lat": 3, "names": ["x"]}}),
        ],
    ),
    "command-r-plus": (
        "CohereForAI-c4ai-command-r-plus-tool_use",
        [
            ProbeCall("f", {"text": 'Tom\'s "<x>" & co\n]```next ünï', "count": -3,
                            "ratio": 2.5, "flag": False, "maybe": None,
                            "items": ["a", 'b "c"', ""],
                            "where": {"lat": -0.125, "names": [], "inner": {"ok": True}}}),
            ProbeCall("f", {"text": "", "where": {"lat": 3, "names": ["x", "y"], "inner": {}}}),
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_values_are_written_as_the_template_writes_them(vocab: Any, name: str) -> None:
    stem, calls = TRICKY[name]
    fmt = format_named(name)
    chat = template(stem)
    tools = WIDE_TOOLS
    if name == "command-r-plus":
        # Its template prints each parameter's Python type: it recurses without end on a
        # list of types, and wants an object's additionalProperties.
        shown = {
            **WIDE["properties"],
            "where": {"type": "object", "additionalProperties": {"type": "number"}},
        }
        del shown["maybe"]
        tools = [{"type": "function", "function": {"name": "f", "description": "d",
                  "parameters": {**WIDE, "properties": shown}}}]  # fmt: skip
    text = chat.render(probe_messages(calls), tools=tools, add_generation_prompt=False)
    assert fmt.render(calls) in text
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("f", WIDE)])
    assert accepts(vocab, grammar, fmt.render(calls)), grammar
    ids = itertools.count()
    for size in (1, 2, 5, 1000):
        parser = fmt.parser(tools={"f": WIDE}, think=None, in_reasoning=False,
                            new_call_id=lambda: f"c{next(ids)}", stop_at_call=False)  # fmt: skip
        out: list[d.Delta] = []
        written = fmt.render(calls)
        for start in range(0, len(written), size):
            out += parser.feed(written[start : start + size])
        assert summary(out + parser.close()) == ("", "", expected(calls))


@pytest.mark.parametrize(
    ("value", "unwritten"),  # the value's text the template does not write
    [("Paris", "<![CDATA[Paris]]>"), ("<b>", "<b>"), ("a\nb", "a\nb"), ("a&b", "a&b")],
)
def test_minicpm5_wraps_exactly_the_strings_its_template_wraps(
    vocab: Any, value: str, unwritten: str
) -> None:
    fmt = format_named("minicpm5")
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])
    call = ProbeCall("get_weather", {"city": value})
    assert fmt.render([call]) in rendered("openbmb-MiniCPM5-1B", [call])
    assert accepts(vocab, grammar, fmt.render([call]))
    head, tail = '<function name="get_weather"><param name="city">', "</param></function>"
    assert not accepts(vocab, grammar, head + unwritten + tail)


@pytest.mark.parametrize(
    "unwritten",  # what LFM2.5's template never writes for get_weather(city='Paris', days=2)
    [
        "get_weather(city = 'Paris', days=2)",
        'get_weather(city="Paris", days=2)',
        "get_weather(city='Paris',days=2)",
        "get_weather(days=2, city='Paris')",
    ],
)
def test_lfm_writes_arguments_only_as_its_template_does(vocab: Any, unwritten: str) -> None:
    fmt = format_named("lfm2.5")
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])

    def turn(call: str) -> str:
        return "<|tool_call_start|>[" + call + "]<|tool_call_end|>"

    written = turn("get_weather(city='Paris', days=2)")
    assert written == fmt.render([ProbeCall("get_weather", {"city": "Paris", "days": 2})])
    assert accepts(vocab, grammar, written)
    assert not accepts(vocab, grammar, turn(unwritten))


@pytest.mark.parametrize("tools", [{"get_weather": SCHEMA}, None])
def test_functionary_reads_its_turn_from_just_after_the_prompts_recipient_marker(
    tools: dict[str, Any] | None,
) -> None:
    prompt = template("meetkai-functionary-medium-v3.2").render(
        [{"role": "user", "content": "hi"}], tools=TOOLS
    )
    assert prompt.endswith(">>>")  # the model's text begins with a recipient
    fmt = format_named("functionary-v3.2")
    for size in (1, 3, 1000):
        parser = fmt.parser(tools=tools, think=None, in_reasoning=False,
                            new_call_id=lambda: "c", stop_at_call=False)  # fmt: skip
        out: list[d.Delta] = []
        answer = "all\nIt is sunny in Köln."
        for start in range(0, len(answer), size):
            out += parser.feed(answer[start : start + size])
        assert summary(out + parser.close()) == ("It is sunny in Köln.", "", [])


def test_minimax_m3_leaves_a_null_out_as_its_template_does(vocab: Any) -> None:
    fmt = format_named("minimax-m3")
    call = ProbeCall("get_weather", {"city": "Paris", "days": None, "tags": ["a", None]})
    text = fmt.render([call])
    assert text in rendered("MiniMax-M3", [call])
    assert "<days>" not in text and "<item>]<]minimax[>[</item>" in text
    assert summary(parse(fmt, text, 3))[2] == [
        ("get_weather", {"city": "Paris", "tags": ["a", ""]})
    ]
    nullable = {"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "string"}}}
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", nullable)])
    assert accepts(vocab, grammar, fmt.render([ProbeCall("get_weather", {"y": "v"})]))
    written = fmt.render([ProbeCall("get_weather", {"x": "None", "y": "v"})])
    assert not accepts(vocab, grammar, written)


def test_command_r_plus_writes_json_only_as_its_template_indents_it(vocab: Any) -> None:
    fmt = format_named("command-r-plus")
    grammar = output_grammar(chat_format=fmt, calls=[CallSpec("get_weather", SCHEMA)])
    text = fmt.render(CALLS[1:])
    assert '\n            "tags": [\n                "a",\n' in text
    assert accepts(vocab, grammar, text)
    for unwritten in (
        text.replace('[\n                "a",', '["a",'),  # compact inside
        text.replace('\n            "city"', '\n          "city"'),  # two spaces short
        text.replace('"city": ', '"city" : '),
    ):
        assert unwritten != text
        assert not accepts(vocab, grammar, unwritten)
    # The arguments come out as compact JSON, in tojson's spacing.
    deltas = parse(fmt, "Let me look." + text, 3)
    arguments = "".join(x.arguments for x in deltas if isinstance(x, d.ToolCallArgumentsDelta))
    assert arguments == json.dumps(CALLS[1].arguments, ensure_ascii=False)
    assert summary(deltas)[0] == "Let me look."
