"""Custom tools' grammars on the bundled model: the input is in the grammar's language.

SmolLM2-135M has never seen these grammars; the GBNF they become (engines/grammars) is
what makes its input match. Each call is forced and streamed; every event and the final
response parse with the openai SDK's own types; the input is judged by Python's `re`
(regex) and by the `lark` package (Lark), not by respond's converter.
"""

from __future__ import annotations

import re
from typing import Any

import lark
import pytest
from openai.types.responses import Response, ResponseCustomToolCall, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.server import Server
from tests.support.sse import stream_events

MODEL = "smollm2-135m"
TIMEOUT = 900
EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)

DATE = r"^\d{4}-\d{2}-\d{2}$"
ARITHMETIC = """
start: expr
expr: expr ("+" | "-") term | term
term: INT | "(" expr ")"
%import common.INT
%import common.WS
%ignore WS
"""
SQL = """
start: "SELECT " COLUMNS " FROM " TABLE (" WHERE " COLUMN " = " INT)?
COLUMNS: "*" | COLUMN ("," " "? COLUMN) ~ 0..3
COLUMN: /[a-z_]{1,12}/
TABLE: /[a-z_]{1,12}/
%import common.INT
"""


def forced_call(server: Server, tool: dict[str, Any], question: str) -> str:
    """The input of a forced, streamed call of `tool`, after checking its events."""
    body = {
        "model": MODEL,
        "input": question,
        "tools": [tool],
        "tool_choice": {"type": "custom", "name": tool["name"]},
        "parallel_tool_calls": False,
        "max_output_tokens": 96,
        "temperature": 0,
        "stream": True,
    }
    events = stream_events(f"{server.base_url}/responses", body, TIMEOUT)
    for event in events:
        EVENTS.validate_python(event)
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed", final
    (call,) = final.output
    assert isinstance(call, ResponseCustomToolCall) and call.name == tool["name"]
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    (done,) = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert "".join(deltas) == done["input"] == call.input
    return call.input


def test_a_forced_call_matches_its_regex(server: Server) -> None:
    tool = {
        "type": "custom",
        "name": "set_date",
        "description": "Sets the date",
        "format": {"type": "grammar", "syntax": "regex", "definition": DATE},
    }
    text = forced_call(server, tool, "When did the first person walk on the moon?")
    assert re.fullmatch(DATE, text), text


@pytest.mark.parametrize(
    ("name", "grammar", "question"),
    [
        ("calculate", ARITHMETIC, "Add up 12 and 30, then take away 7."),
        ("query", SQL, "Which users are older than 30? Query the users table."),
    ],
)
def test_a_forced_call_parses_under_its_lark_grammar(
    server: Server, name: str, grammar: str, question: str
) -> None:
    tool = {
        "type": "custom",
        "name": name,
        "description": "Runs its input",
        "format": {"type": "grammar", "syntax": "lark", "definition": grammar},
    }
    text = forced_call(server, tool, question)
    tree = lark.Lark(grammar, parser="earley").parse(text)  # raises if it does not parse
    assert tree.data == "start", text
