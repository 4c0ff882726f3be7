"""The stream parser on token streams, JSON formats: markup split anywhere never leaks as text."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import pytest

from respond.engines import _base as d
from respond.engines.formats import THINK_TAGS, StreamParser
from respond.engines.formats._json import HERMES, LLAMA3, MISTRAL_V1, Dialect

FORMATS = {"hermes": HERMES, "mistral": MISTRAL_V1, "llama3": LLAMA3}


def reader(
    dialect: Dialect | None,
    new_call_id: Callable[[], str],
    *,
    thinking: bool = False,
    in_reasoning: bool = False,
    stop_at_call: bool = False,
) -> StreamParser:
    """The format's parser; without a dialect, no tools: only the reasoning split."""
    return FORMATS[dialect or "hermes"].parser(
        tools={} if dialect else None,
        think=THINK_TAGS if thinking or in_reasoning else None,
        in_reasoning=in_reasoning,
        new_call_id=new_call_id,
        stop_at_call=stop_at_call,
    )


def parse(dialect: Dialect | None, text: str, size: int, **options: bool) -> list[d.Delta]:
    """Feed `text` in chunks of `size` characters, as a tokenizer would."""
    ids = itertools.count()
    parser = reader(dialect, lambda: f"call_{next(ids)}", **options)
    out: list[d.Delta] = []
    for start in range(0, len(text), size):
        out += parser.feed(text[start : start + size])
    return out + parser.close()


def summary(deltas: list[d.Delta]) -> list[tuple[str, str]]:
    """Merge consecutive deltas of one kind: (kind, text) pairs, calls as (name, args)."""
    out: list[tuple[str, str]] = []
    for delta in deltas:
        kind: str
        if isinstance(delta, d.TextDelta | d.ReasoningDelta):
            kind, text = delta.type, delta.text
        elif isinstance(delta, d.ToolCallStart):
            out.append(("call", delta.name))
            continue
        elif isinstance(delta, d.ToolCallArgumentsDelta):
            kind, text = "args", delta.arguments
        else:
            out.append(("end", ""))
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


SIZES = [1, 2, 3, 5, 7, 1000]


@pytest.mark.parametrize("size", SIZES)
def test_hermes_call_between_text(size: int) -> None:
    text = (
        'Let me check.<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris", "tags": ["a", "}"]}}\n</tool_call>\nDone.'
    )
    assert summary(parse("hermes", text, size)) == [
        ("text", "Let me check."),
        ("call", "get_weather"),
        ("args", '{"city": "Paris", "tags": ["a", "}"]}'),
        ("end", ""),
        ("text", "Done."),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_close_marker_cut_by_the_token_limit_is_not_text(size: int) -> None:
    text = '<tool_call>\n{"name": "pick", "arguments": {"input": "red"}}\n</tool_call'
    assert summary(parse("hermes", text, size)) == [
        ("call", "pick"),
        ("args", '{"input": "red"}'),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_two_hermes_calls_get_distinct_ids(size: int) -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
    )
    deltas = parse("hermes", text, size)
    starts = [x for x in deltas if isinstance(x, d.ToolCallStart)]
    assert [s.name for s in starts] == ["a", "b"]
    assert starts[0].call_id != starts[1].call_id
    assert not [x for x in deltas if isinstance(x, d.TextDelta)]


@pytest.mark.parametrize("size", SIZES)
def test_arguments_stream_before_the_call_closes(size: int) -> None:
    ids = itertools.count()
    parser = reader("hermes", lambda: f"c{next(ids)}")
    text = '<tool_call>{"name": "f", "arguments": {"query": "long text here'
    out: list[d.Delta] = []
    for start in range(0, len(text), size):
        out += parser.feed(text[start : start + size])
    args = "".join(x.arguments for x in out if isinstance(x, d.ToolCallArgumentsDelta))
    assert args == '{"query": "long text here'


@pytest.mark.parametrize("size", SIZES)
def test_key_order_arguments_first_is_emitted_whole(size: int) -> None:
    text = '<tool_call>{"arguments": {"q": 1}, "name": "search"}</tool_call>'
    assert summary(parse("hermes", text, size)) == [
        ("call", "search"),
        ("args", '{"q": 1}'),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_think_block_becomes_reasoning(size: int) -> None:
    text = "<think>Paris is in France; x < y.</think>\n\nIt is sunny."
    assert summary(parse(None, text, size, thinking=True)) == [
        ("reasoning", "Paris is in France; x < y."),
        ("text", "It is sunny."),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_prompt_opened_think_block(size: int) -> None:
    text = "step one</think>answer"
    assert summary(parse(None, text, size, in_reasoning=True)) == [
        ("reasoning", "step one"),
        ("text", "answer"),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_reasoning_then_call(size: int) -> None:
    text = '<think>need weather</think>\n<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'
    assert summary(parse("hermes", text, size, thinking=True)) == [
        ("reasoning", "need weather"),
        ("call", "w"),
        ("args", "{}"),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_mistral_list_of_calls(size: int) -> None:
    text = '[TOOL_CALLS][{"name": "a", "arguments": {"x": [1, 2]}}, {"name": "b", "arguments": {}}]'
    assert summary(parse("mistral", text, size)) == [
        ("call", "a"),
        ("args", '{"x": [1, 2]}'),
        ("end", ""),
        ("call", "b"),
        ("args", "{}"),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_llama3_json_turn_is_a_call(size: int) -> None:
    text = '{"name": "get_time", "parameters": {"zone": "UTC"}}'
    assert summary(parse("llama3", text, size)) == [
        ("call", "get_time"),
        ("args", '{"zone": "UTC"}'),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_llama3_python_tag(size: int) -> None:
    text = '<|python_tag|>{"name": "f", "parameters": {}}'
    assert summary(parse("llama3", text, size)) == [("call", "f"), ("args", "{}"), ("end", "")]


@pytest.mark.parametrize("size", SIZES)
def test_llama3_plain_json_answer_stays_text(size: int) -> None:
    assert summary(parse("llama3", '{"answer": 42}', size)) == [("text", '{"answer": 42}')]


@pytest.mark.parametrize("size", SIZES)
def test_text_with_angle_brackets_is_not_held_forever(size: int) -> None:
    text = "a <b> and <tool and <think"
    assert summary(parse("hermes", text, size)) == [("text", text)]


@pytest.mark.parametrize("size", SIZES)
def test_broken_call_keeps_words_drops_markup(size: int) -> None:
    text = "<tool_call>not json</tool_call> ok"
    out = summary(parse("hermes", text, size))
    assert "".join(t for k, t in out if k == "text") == "not json ok"


def test_markup_is_held_back_mid_stream() -> None:
    ids = itertools.count()
    parser = reader("hermes", lambda: f"c{next(ids)}")
    assert summary(parser.feed("Hi <tool_")) == [("text", "Hi ")]
    assert parser.feed("ca") == []
    assert summary(parser.feed('ll>{"name": "x", "arguments": {}}')) == [
        ("call", "x"),
        ("args", "{}"),
        ("end", ""),
    ]


def test_stop_at_call_reports_where_the_markup_began() -> None:
    parser = reader("hermes", lambda: "c", stop_at_call=True)
    out = parser.feed("Sure. <tool")
    out += parser.feed('_call>{"name"')
    assert summary(out) == [("text", "Sure. ")]
    assert parser.halted_at == len("Sure. ")
    assert parser.feed("more") == [] and parser.close() == []


def test_truncated_call_closes_with_what_was_written() -> None:
    deltas = parse("hermes", '<tool_call>{"name": "f", "arguments": {"a": "b', 4)
    assert summary(deltas) == [("call", "f"), ("args", '{"a": "b'), ("end", "")]


def test_arguments_are_json_that_parses() -> None:
    args = {"s": 'q"uo}te', "n": [1, {"k": None}], "u": "é"}
    text = f"<tool_call>{json.dumps({'name': 'f', 'arguments': args})}</tool_call>"
    deltas = parse("hermes", text, 3)
    streamed = "".join(x.arguments for x in deltas if isinstance(x, d.ToolCallArgumentsDelta))
    assert json.loads(streamed) == args


@pytest.mark.parametrize("size", SIZES)
def test_call_markup_cut_before_its_name_is_neither_call_nor_text(size: int) -> None:
    for cut in ("<tool_call>\n", '<tool_call>\n{"na', '<tool_call>\n{"name": "f", "argu'):
        parser = reader("hermes", lambda: "c")
        out: list[d.Delta] = []
        for start in range(0, len(cut), size):
            out += parser.feed(cut[start : start + size])
        assert parser.unnamed_call, cut
        assert out + parser.close() == [], cut
    parser = reader("hermes", lambda: "c")
    parser.feed('<tool_call>{"name": "f", "arguments": {')
    assert not parser.unnamed_call


@pytest.mark.parametrize("size", SIZES)
def test_a_further_call_marker_cut_short_is_not_text(size: int) -> None:
    first = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
    for cut in ("<", "<tool", "<tool_call"):
        parser = reader("hermes", lambda: "c")
        out: list[d.Delta] = []
        text = first + cut
        for start in range(0, len(text), size):
            out += parser.feed(text[start : start + size])
        assert parser.unnamed_call, cut
        out += parser.close()
        assert summary(out) == [("call", "f"), ("args", "{}"), ("end", "")], cut
    # Before any call, such text is the model's.
    assert summary(parse("hermes", "a <tool", size)) == [("text", "a <tool")]


@pytest.mark.parametrize("size", SIZES)
def test_mistral_objects_without_their_list_are_calls_too(size: int) -> None:
    text = '[TOOL_CALLS] {"name": "a", "arguments": {}}, {"arguments": {"x": 1}, "name": "b"}'
    assert summary(parse("mistral", text, size)) == [
        ("call", "a"),
        ("args", "{}"),
        ("end", ""),
        ("call", "b"),
        ("args", '{"x": 1}'),
        ("end", ""),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_a_marker_without_a_call_object_keeps_the_words_as_written(size: int) -> None:
    assert summary(parse("llama3", "hi<|python_tag|>\nthere", size)) == [("text", "hi\nthere")]
