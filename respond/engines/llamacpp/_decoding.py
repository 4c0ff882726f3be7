"""What the embedded engine constrains, decided from a ChatTurn (pure, no model needed).

- tool_choice "required" / a named function / allowed_tools "required": the whole output
  is tool calls, under a grammar built from the functions' schemas.
- "auto": the model writes freely; when it starts a call, the engine rewinds to the
  start of the markup and writes the call under the same grammar (`call_grammar`), so a
  call is valid by construction while the decision to call stays the model's.
- text.format json_schema / json_object: the output is that JSON (or, with tools under
  "auto", either that JSON or tool calls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from respond._ids import new_id
from respond.engines._base import ChatTurn
from respond.engines._parsing import Dialect, OutputParser
from respond.engines._tools import visible_tools
from respond.engines.llamacpp._grammar import CallSpec, output_grammar

__all__ = ["DecodingPlan", "plan_decoding"]

Think = Literal["open", "inside"] | None


@dataclass(frozen=True)
class DecodingPlan:
    dialect: Dialect | None  # None: no tools, so call markup is just text
    grammar: str | None  # for the output from its first token
    call_grammar: str | None  # for a call the model starts on its own ("auto")
    thinking: bool
    starts_in_reasoning: bool
    new_call_id: Callable[[], str] = lambda: new_id("call")

    def parser(self, *, stop_at_call: bool, after_rewind: bool = False) -> OutputParser:
        return OutputParser(
            self.dialect,
            thinking=self.thinking and not after_rewind,
            in_reasoning=self.starts_in_reasoning and not after_rewind,
            new_call_id=self.new_call_id,
            stop_at_call=stop_at_call,
        )


def plan_decoding(
    turn: ChatTurn, dialect: Dialect, template_thinks: bool, prompt_tail: str
) -> DecodingPlan:
    tools = visible_tools(turn)
    thinking = template_thinks and turn.reasoning_effort != "none"
    # Templates such as DeepSeek-R1's open the <think> block in the prompt itself.
    inside = thinking and prompt_tail.rstrip().endswith("<think>")
    think: Think = "inside" if inside else "open" if thinking else None
    calls = [CallSpec(t.name, t.parameters if t.strict else None) for t in tools]
    max_calls = 1 if not turn.parallel_tool_calls else turn.max_tool_calls
    json_output = turn.json_schema is not None or turn.json_object
    forced = bool(tools) and turn.tool_choice.mode == "required"

    def build(*, with_calls: bool, with_json: bool, think_: Think) -> str:
        return output_grammar(
            dialect=dialect,
            calls=calls if with_calls else (),
            max_calls=max_calls,
            json_output=with_json,
            schema=turn.json_schema,
            think=think_,
        )

    grammar: str | None = None
    call_grammar: str | None = None
    if forced:
        grammar = build(with_calls=True, with_json=False, think_=think)
    elif json_output:
        grammar = build(with_calls=bool(tools), with_json=True, think_=think)
    elif tools:
        call_grammar = build(with_calls=True, with_json=False, think_=None)
    return DecodingPlan(
        dialect=dialect if tools else None,
        grammar=grammar,
        call_grammar=call_grammar,
        thinking=thinking,
        starts_in_reasoning=inside,
    )
