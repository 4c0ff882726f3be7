"""What the embedded engine constrains, decided from a ChatTurn (pure, no model needed).

- tool_choice "required" / a named function / allowed_tools "required": the whole output
  is tool calls, under a grammar built from the functions' schemas.
- "auto": the model writes freely; when it starts a call, the engine rewinds to the
  start of the markup and writes the call under the same grammar (`call_grammar`), so a
  call is valid by construction while the decision to call stays the model's.
- text.format json_schema / json_object: the output is that JSON (or, with tools under
  "auto", either that JSON or tool calls).

Every function's arguments follow its schema, strict or not, whenever the grammar can
enforce the schema. `strict: false` only means respond does not refuse a schema it cannot
enforce: such a function's arguments fall back to any JSON object (and the log says so).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from respond._ids import new_id
from respond.engines._base import (
    ChatTurn,
    FunctionSpec,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
)
from respond.engines._tools import visible_tools
from respond.engines.formats import PROBE, THINK_TAGS, ChatFormat, StreamParser, Think
from respond.engines.llamacpp._grammar import (
    REASONING_PROBE,
    CallLead,
    CallSpec,
    input_schema,
    output_grammar,
    unsupported_keyword,
)

__all__ = ["DecodingPlan", "arguments_schema", "calls_from_start", "plan_decoding"]

log = logging.getLogger("respond.engine")

ThinkMode = Literal["open", "inside"] | None
# Reasoning before forced calls, at most (characters): a model that reasons on and on (one
# whose template opened the block, a small one) must still come to the call. Never more
# than half the output limit either (a token holds a character at least), so the call fits.
FORCED_THINK_CHARS = 1000


def arguments_schema(tool: FunctionSpec) -> Mapping[str, Any] | None:
    """The schema a function's arguments are decoded under (None: any JSON object); a
    custom tool's `input` under its grammar."""
    found = unsupported_keyword(tool.parameters)
    if found is None:
        if tool.grammar is not None:
            return input_schema(tool.parameters, tool.grammar)
        return tool.parameters
    # Only a non-strict tool gets here: a strict one was refused with a 400 before.
    keyword, where = found
    log.info(
        "function %r: its schema's '%s' (at %s) cannot be enforced; the arguments are any "
        "JSON object (strict is false)",
        tool.name,
        keyword,
        where,
    )
    return None


@dataclass(frozen=True)
class DecodingPlan:
    chat_format: ChatFormat
    grammar: str | None  # for the output from its first token
    call_grammar: str | None  # for a call the model starts on its own ("auto")
    think: Think | None  # the reasoning markup the output may hold
    starts_in_reasoning: bool
    # The functions the model may call; None: no tools, so call markup is just text.
    tools: Mapping[str, Mapping[str, Any] | None] | None = None
    new_call_id: Callable[[], str] = lambda: new_id("call")
    lead: CallLead | None = None  # what `grammar` writes before the calls (None: nothing)

    @property
    def thinking(self) -> bool:
        return self.think is not None

    def parser(self, *, stop_at_call: bool, after_rewind: bool = False) -> StreamParser:
        return self.chat_format.parser(
            tools=self.tools,
            think=None if after_rewind else self.think,
            in_reasoning=self.starts_in_reasoning and not after_rewind,
            new_call_id=self.new_call_id,
            stop_at_call=stop_at_call,
        )


def calls_from_start(turn: ChatTurn) -> bool:
    """Whether the turn's grammar may write calls from the output's first token (tool_choice
    "required", or a JSON format with tools): the grammar that follows a CallLead."""
    json_output = turn.json_schema is not None or turn.json_object
    return bool(visible_tools(turn)) and (turn.tool_choice.mode == "required" or json_output)


def plan_decoding(
    turn: ChatTurn,
    chat_format: ChatFormat,
    think_markup: Think | None,
    prompt_tail: str,
    lead: CallLead | None = None,
) -> DecodingPlan:
    """The turn's plan; `lead`, what the template writes before the turn's calls, is
    followed by the grammar of forced calls where the parser reads it as markup."""
    tools = visible_tools(turn)
    think = think_markup if turn.reasoning_effort != "none" else None
    # Templates such as DeepSeek-R1's open the reasoning block in the prompt itself; others
    # (Command R7B, Gemma 4, Qwen3 without thinking) close an empty one there: the answer
    # or the calls come next, and a grammar that let the model open another block would
    # write what no history of the turn holds. (Closed means opened too: Harmony's close,
    # `<|end|><|start|>assistant`, is also how any prompt of its ends.)
    tail = prompt_tail.rstrip()
    inside = think is not None and tail.endswith(think.open.rstrip())
    closed = (
        think is not None
        and not inside
        and tail.endswith(think.close.rstrip())
        and think.open.strip() in tail
    )
    mode: ThinkMode = "inside" if inside else "open" if think and not closed else None
    calls = [CallSpec(t.name, arguments_schema(t)) for t in tools]
    max_calls = 1 if not turn.parallel_tool_calls else turn.max_tool_calls
    json_output = turn.json_schema is not None or turn.json_object
    forced = bool(tools) and turn.tool_choice.mode == "required"

    think_limit = FORCED_THINK_CHARS
    if turn.max_output_tokens is not None:
        think_limit = max(0, min(think_limit, turn.max_output_tokens // 2))

    if lead is not None:
        lead = _readable(lead, chat_format, think, inside, reasons=mode is not None)

    def build(*, with_calls: bool, with_json: bool, think_: ThinkMode, led: bool = True) -> str:
        return output_grammar(
            chat_format=chat_format,
            calls=calls if with_calls else (),
            max_calls=max_calls,
            json_output=with_json,
            schema=turn.json_schema,
            think=think_,
            think_markup=think or THINK_TAGS,
            think_limit=think_limit if with_calls and think_ else None,
            lead=lead if led else None,
        )

    grammar: str | None = None
    call_grammar: str | None = None
    if forced:
        grammar = build(with_calls=True, with_json=False, think_=mode)
    elif json_output:
        grammar = build(with_calls=bool(tools), with_json=True, think_=mode)
    elif tools:
        # After a rewind: the model wrote what comes before the call itself.
        call_grammar = build(with_calls=True, with_json=False, think_=None, led=False)
    return DecodingPlan(
        chat_format=chat_format,
        grammar=grammar,
        call_grammar=call_grammar,
        think=think,
        starts_in_reasoning=inside,
        tools={call.name: call.schema for call in calls} if tools else None,
        lead=lead if calls_from_start(turn) else None,
    )


def _readable(
    lead: CallLead, fmt: ChatFormat, think: Think | None, inside: bool, *, reasons: bool
) -> CallLead | None:
    """`lead` as far as the turn's parser reads it as markup: the probe call after it and
    nothing else (in `around`, the reasoning probe without the whitespace around it);
    `around` only where the turn may reason."""
    bare = lead.bare
    if bare is not None and not _reads_as(fmt, think, inside, bare, ""):
        bare = None
    around = lead.around if think is not None and reasons else None
    if around is not None and not _reads_as(
        fmt, think, inside, REASONING_PROBE.join(around), REASONING_PROBE
    ):
        around = None
    return None if bare is None and around is None else CallLead(bare, around)


def _reads_as(
    fmt: ChatFormat, think: Think | None, inside: bool, lead: str, reasoning: str
) -> bool:
    parser = fmt.parser(
        tools={PROBE.name: None},
        think=think,
        in_reasoning=inside,
        new_call_id=lambda: "call00000",
        stop_at_call=False,
    )
    deltas = parser.feed(lead + fmt.render([PROBE])) + parser.close()
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    thought = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    names = [d.name for d in deltas if isinstance(d, ToolCallStart)]
    arguments = "".join(d.arguments for d in deltas if isinstance(d, ToolCallArgumentsDelta))
    return (
        not text
        and thought == reasoning
        and names == [PROBE.name]
        and json.loads(arguments or "null") == dict(PROBE.arguments)
    )
