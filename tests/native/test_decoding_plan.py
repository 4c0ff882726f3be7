"""What the embedded engine constrains for each tool_choice and text format."""

from __future__ import annotations

import logging

import pytest

from respond.engines import ChatMessage, ChatTurn, FunctionSpec, ToolChoice, visible_tools
from respond.engines.formats import HERMES, THINK_TAGS, format_named
from respond.engines.llamacpp._decoding import arguments_schema, plan_decoding

A = FunctionSpec("a", None, {"type": "object", "properties": {"x": {"type": "string"}}})
B = FunctionSpec("b", None, {"type": "object"}, strict=False)


def turn(**options: object) -> ChatTurn:
    return ChatTurn(model="m", messages=[ChatMessage(role="user", content="hi")], **options)  # type: ignore[arg-type]


def test_visible_tools_follow_tool_choice() -> None:
    assert visible_tools(turn(tools=[A, B])) == [A, B]
    assert visible_tools(turn(tools=[A, B], tool_choice=ToolChoice("none"))) == []
    assert visible_tools(turn(tools=[A, B], tool_choice=ToolChoice("auto", ("b",)))) == [B]


def test_auto_writes_freely_and_constrains_a_started_call() -> None:
    plan = plan_decoding(turn(tools=[A, B]), HERMES, None, "")
    assert plan.grammar is None and plan.call_grammar is not None
    assert '\\"name\\": \\"a\\"' in plan.call_grammar
    assert plan.chat_format is HERMES and plan.tools is not None


def test_required_forces_calls_from_the_first_token() -> None:
    plan = plan_decoding(
        turn(tools=[A], tool_choice=ToolChoice("required")), format_named("mistral"), None, ""
    )
    assert plan.grammar is not None and plan.call_grammar is None
    assert "[TOOL_CALLS][" in plan.grammar


def test_named_function_grammar_knows_only_that_function() -> None:
    chosen = turn(tools=[A, B], tool_choice=ToolChoice("required", ("b",)))
    grammar = plan_decoding(chosen, HERMES, None, "").grammar
    assert grammar is not None
    assert '\\"b\\"' in grammar and '\\"a\\"' not in grammar


def test_parallel_false_and_max_tool_calls_bound_the_calls() -> None:
    single = turn(tools=[A], tool_choice=ToolChoice("required"), parallel_tool_calls=False)
    assert "root ::= ( one-call )\n" in (plan_decoding(single, HERMES, None, "").grammar or "")
    two = turn(tools=[A], tool_choice=ToolChoice("required"), max_tool_calls=2)
    grammar = plan_decoding(two, HERMES, None, "").grammar or ""
    assert 'root ::= ( one-call ("\\n" one-call)? )' in grammar


def test_no_tools_means_markup_is_text() -> None:
    assert plan_decoding(turn(), HERMES, None, "").tools is None


def test_json_output_with_tools_allows_either() -> None:
    plan = plan_decoding(turn(tools=[A], json_object=True), HERMES, None, "")
    assert plan.grammar is not None and "one-call" in plan.grammar and "object" in plan.grammar


def test_thinking_templates_and_effort_none() -> None:
    plan = plan_decoding(turn(), HERMES, THINK_TAGS, "<|im_start|>assistant\n")
    assert plan.thinking and not plan.starts_in_reasoning
    opened = plan_decoding(turn(), HERMES, THINK_TAGS, "<|Assistant|><think>\n")
    assert opened.starts_in_reasoning
    off = plan_decoding(turn(reasoning_effort="none"), HERMES, THINK_TAGS, "")
    assert not off.thinking


def test_a_prompt_that_closes_an_empty_reasoning_block_forces_no_other() -> None:
    """Command R7B's generation prompt ends with an empty thinking block: the forced call
    comes at once (the bundled model wrote a second empty block before it, which the
    history does not hold). Reasoning the model writes in free text is still parsed."""
    cohere = format_named("command-r7b")
    assert cohere.think is not None
    forced = turn(tools=[A], tool_choice=ToolChoice("required"))
    tail = "<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>"
    closed = plan_decoding(forced, cohere, cohere.think, tail)
    opening = plan_decoding(forced, cohere, cohere.think, "<|CHATBOT_TOKEN|>")
    assert "START_THINKING" not in (closed.grammar or "")
    assert "START_THINKING" in (opening.grammar or "")
    assert closed.thinking and not closed.starts_in_reasoning


def test_a_non_strict_tool_follows_its_schema_when_it_can_be_enforced() -> None:
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    loose = FunctionSpec("weather", None, city, strict=False)
    assert arguments_schema(loose) == city
    grammar = plan_decoding(
        turn(tools=[loose], tool_choice=ToolChoice("required")), HERMES, None, ""
    ).grammar
    assert grammar is not None and '\\"city\\"' in grammar


def test_a_non_strict_schema_that_cannot_be_enforced_falls_back_to_any_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unique = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    loose = FunctionSpec("tag", None, unique, strict=False)
    with caplog.at_level(logging.INFO, logger="respond.engine"):
        assert arguments_schema(loose) is None
    assert "function 'tag'" in caplog.text and "uniqueItems" in caplog.text
    grammar = plan_decoding(
        turn(tools=[loose], tool_choice=ToolChoice("required")), HERMES, None, ""
    ).grammar
    assert grammar is not None and '\\"tags\\"' not in grammar


def test_reasoning_before_a_forced_call_takes_at_most_half_the_output_limit() -> None:
    forced = turn(tools=[A], tool_choice=ToolChoice("required"), max_output_tokens=90)
    grammar = plan_decoding(forced, HERMES, THINK_TAGS, "<think>\n").grammar or ""
    assert "think ::= [^<]{0,45}" in grammar
    auto = plan_decoding(turn(tools=[A], max_output_tokens=90), HERMES, THINK_TAGS, "").call_grammar
    assert "{0,45}" not in (auto or "")
