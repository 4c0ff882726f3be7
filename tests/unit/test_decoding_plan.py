"""What the embedded engine constrains for each tool_choice and text format."""

from __future__ import annotations

from respond.engines import ChatMessage, ChatTurn, FunctionSpec, ToolChoice, visible_tools
from respond.engines.llamacpp._decoding import plan_decoding

A = FunctionSpec("a", None, {"type": "object", "properties": {"x": {"type": "string"}}})
B = FunctionSpec("b", None, {"type": "object"}, strict=False)


def turn(**options: object) -> ChatTurn:
    return ChatTurn(model="m", messages=[ChatMessage(role="user", content="hi")], **options)  # type: ignore[arg-type]


def test_visible_tools_follow_tool_choice() -> None:
    assert visible_tools(turn(tools=[A, B])) == [A, B]
    assert visible_tools(turn(tools=[A, B], tool_choice=ToolChoice("none"))) == []
    assert visible_tools(turn(tools=[A, B], tool_choice=ToolChoice("auto", ("b",)))) == [B]


def test_auto_writes_freely_and_constrains_a_started_call() -> None:
    plan = plan_decoding(turn(tools=[A, B]), "hermes", False, "")
    assert plan.grammar is None and plan.call_grammar is not None
    assert '\\"name\\": \\"a\\"' in plan.call_grammar
    assert plan.dialect == "hermes"


def test_required_forces_calls_from_the_first_token() -> None:
    plan = plan_decoding(turn(tools=[A], tool_choice=ToolChoice("required")), "mistral", False, "")
    assert plan.grammar is not None and plan.call_grammar is None
    assert "[TOOL_CALLS][" in plan.grammar


def test_named_function_grammar_knows_only_that_function() -> None:
    chosen = turn(tools=[A, B], tool_choice=ToolChoice("required", ("b",)))
    grammar = plan_decoding(chosen, "hermes", False, "").grammar
    assert grammar is not None
    assert '\\"b\\"' in grammar and '\\"a\\"' not in grammar


def test_parallel_false_and_max_tool_calls_bound_the_calls() -> None:
    single = turn(tools=[A], tool_choice=ToolChoice("required"), parallel_tool_calls=False)
    assert "calls ::= one-call\n" in (plan_decoding(single, "hermes", False, "").grammar or "")
    two = turn(tools=[A], tool_choice=ToolChoice("required"), max_tool_calls=2)
    grammar = plan_decoding(two, "hermes", False, "").grammar or ""
    assert 'calls ::= one-call ("\\n" one-call)?' in grammar


def test_no_tools_means_markup_is_text() -> None:
    assert plan_decoding(turn(), "hermes", False, "").dialect is None


def test_json_output_with_tools_allows_either() -> None:
    plan = plan_decoding(turn(tools=[A], json_object=True), "hermes", False, "")
    assert plan.grammar is not None and "calls" in plan.grammar and "object" in plan.grammar


def test_thinking_templates_and_effort_none() -> None:
    plan = plan_decoding(turn(), "hermes", True, "<|im_start|>assistant\n")
    assert plan.thinking and not plan.starts_in_reasoning
    opened = plan_decoding(turn(), "hermes", True, "<|Assistant|><think>\n")
    assert opened.starts_in_reasoning
    off = plan_decoding(turn(reasoning_effort="none"), "hermes", True, "")
    assert not off.thinking
