"""Custom tools' grammars (engines/grammars): regex and Lark to GBNF, checked by llama.cpp's
own grammar sampler on sample texts, against Python's `re` and the `lark` package."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import lark
import pytest

from respond.engines._base import (
    ChatTurn,
    ConstraintError,
    EngineError,
    FunctionSpec,
    InputGrammar,
    ToolCallEnd,
    ToolChoice,
)
from respond.engines.formats import FORMATS, HERMES, ChatFormat
from respond.engines.grammars import GrammarError, gbnf_rules, mismatch, parse_grammar
from respond.engines.llamacpp._decoding import arguments_schema
from respond.engines.llamacpp._grammar import CallSpec, output_grammar, unsupported_keyword
from respond.engines.llamacpp._prepare import checked_plan
from respond.engines.upstream._common import StrictArguments
from respond.engines.upstream._responses import ResponsesTranslator
from respond.protocol.errors import APIError
from respond.protocol.limits import Limits
from respond.protocol.requests import CreateResponseBody
from respond.responses.limits import check_request
from tests.support.gbnf import accepts, bundled_vocab, compiles

CODEX_REQUEST = Path(__file__).parents[1] / "clients" / "data" / "codex-0.171.0-request.json"


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


def gbnf(syntax: Literal["lark", "regex"], definition: str, mode: Literal["raw", "json"]) -> str:
    grammar = parse_grammar(syntax, definition, max_repeat=1000)
    root, rules = gbnf_rules(grammar, "t", mode)
    return "\n".join([f"root ::= {root}", *(f"{name} ::= {body}" for name, body in rules.items())])


# ---------------------------------------------------------------- regex

# (pattern, texts it fully matches, texts it does not): one construct each.
REGEXES = [
    (r"^\d{4}-\d{2}-\d{2}$", ["2024-01-31"], ["2024-1-31", "2024-01-31x", "abcd-01-31"]),
    (r"abc", ["abc"], ["ab", "abcd", "abd"]),
    (r"a\.b\*c\\d\(", [r"a.b*c\d("], ["axb*c\\d("]),
    (r"\x41\u00e9\t", ["Aé\t"], ["A\t"]),
    (r"a.c", ["abc", "a c", "a-c"], ["a\nc", "ac"]),
    (r"\w+\s\W", ["ab_9 !"], ["ab c", "ab\ta"]),
    (r"\D\S", ["a-"], ["1a", "a "]),
    (r"[a-c0-2_]+", ["a1_c", "2"], ["d", "a3", ""]),
    (r"[^a-z\d]", ["A", "-", "é"], ["a", "5"]),
    (r"[]a-]x", ["]x", "ax", "-x"], ["bx"]),
    (r"[\d.]+", ["1.5"], ["1,5"]),
    (r"(ab)+", ["ab", "abab"], ["", "aba"]),
    (r"(?:ab|cd)e", ["abe", "cde"], ["ae", "abcde"]),
    (r"(?P<year>\d\d)/(\d)", ["24/1"], ["24/"]),
    (r"cat|dog|^bird$", ["cat", "dog", "bird"], ["cow", "catdog"]),
    (r"ab?c*d+", ["ad", "abccdd"], ["abc", "bd"]),
    (r"x{3}y{2,}z{1,2}", ["xxxyyz", "xxxyyyzz"], ["xxyyz", "xxxyz", "xxxyyzzz"]),
    (r"x{,2}", ["", "xx"], ["xxx"]),
    (r"a+?b*?c??", ["aab", "a", "ac"], ["b"]),
    (r"a{2,3}?", ["aa", "aaa"], ["a"]),
    (r'say "hi"\n', ['say "hi"\n'], ["say hi\n"]),
    (r"x{", ["x{"], ["x"]),
    (r"(a?)*b", ["b", "aab"], ["a", "ba"]),
]


@pytest.mark.parametrize(("pattern", "good", "bad"), REGEXES)
@pytest.mark.parametrize("mode", ["raw", "json"])
def test_regexes_match_what_python_matches(
    vocab: Any, pattern: str, good: list[str], bad: list[str], mode: Literal["raw", "json"]
) -> None:
    grammar = gbnf("regex", pattern, mode)
    assert compiles(vocab, grammar), grammar
    for text, expected in [*((t, True) for t in good), *((t, False) for t in bad)]:
        assert bool(re.fullmatch(pattern, text)) == expected, (pattern, text)
        written = json.dumps(text, ensure_ascii=False)[1:-1] if mode == "json" else text
        assert accepts(vocab, grammar, written) == expected, (pattern, text, grammar)


def test_json_mode_takes_only_the_escapes_json_dumps_writes(vocab: Any) -> None:
    grammar = gbnf("regex", r'.+"', "json")
    assert accepts(vocab, grammar, 'a\\tb\\\\\\"')  # a<TAB>b\" as json.dumps writes it
    assert not accepts(vocab, grammar, 'a\tb\\"')  # a raw tab is not JSON
    assert not accepts(vocab, grammar, 'ab"')  # nor an unescaped quote


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\1", "backreferences"),
        (r"(?P<x>a)(?P=x)", "backreferences"),
        (r"(?=a)a", "lookaround"),
        (r"a(?!b)", "lookaround"),
        (r"(?<=a)b", "lookaround"),
        (r"(?i)a", "inline flags"),
        (r"\bword\b", "word boundaries"),
        (r"\p{L}", "Unicode property"),
        (r"a**", "multiple repeat"),
        (r"*a", "nothing to repeat"),
        (r"a++", "possessive"),
        (r"(ab", "missing )"),
        (r"ab)", "unbalanced"),
        (r"[ab", "unterminated"),
        (r"[z-a]", "bad character range"),
        (r"a^b", "'^'"),
        (r"a$b", "'$'"),
        (r"x{2,1}", "below"),
        (r"x{1001}", "over the limit of 1000"),
        (r"\q", "unknown escape"),
        (r"\x4", "hexadecimal"),
    ],
)
def test_regexes_a_grammar_cannot_enforce_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(why)):
        parse_grammar("regex", pattern, max_repeat=1000)


# ---------------------------------------------------------------- Lark

ARITHMETIC = r"""
start: expr
expr: expr ("+" | "-") term | term
term: NUMBER | "(" expr ")"
%import common.NUMBER
%import common.WS
%ignore WS
"""

SQL = r"""
start: "select "i cols " from " TABLE where? ";"?
cols: "*" | COL ("," COL)*
where: " where " COL "=" (ESCAPED_STRING | INT) -> eq
COL: /[a-z_]+/
TABLE.2: /[a-z_]+/i
%import common (ESCAPED_STRING, INT)
"""

LARK = [
    (
        ARITHMETIC,
        ["1", "1+2", "1 + 2.5 - (3-4)", "(1)"],
        ["", "1+", "+1", "1 2", "(1"],
    ),
    (
        SQL,
        ["SELECT * from t", "select a,b from T where a=1;", 'Select x from t where x="a b"'],
        ["select from t", "select a, from t", 'select a from t where a="x', "select * from t;;"],
    ),
    ('start: "a" ~ 2 "b" ~ 1..3\n', ["aab", "aabbb"], ["ab", "aabbbb"]),
    ('start: ["x"] DIGITS\nDIGITS: "0".."9"+\n', ["x12", "7"], ["x", "xa"]),
    ("?start: word+\n!word: LETTER\n%import common.LETTER\n", ["ab"], ["a1", ""]),
    ('start: (A | B)*\nA: "a"\nB: "b"\n  | "c"\n', ["", "abca"], ["d"]),
    (
        'start: WORD ("," WORD)*\n%import common.WORD\n%import common.WS_INLINE -> S\n%ignore S\n',
        ["a,b", "a , b"],
        ["a,", "a b"],
    ),
    ("start: /[0-9]{2}\\/[0-9]{2}/ CNAME\n%import common.CNAME\n", ["12/34ab_1"], ["12/34 1ab"]),
    ("start: SIGNED_NUMBER\n%import common.SIGNED_NUMBER\n", ["-1.5e3", "+2", "3."], ["e3", "1e"]),
    ('start: "line" NEWLINE "x"\n%import common.NEWLINE\n', ["line\nx", "line\r\n\nx"], ["linex"]),
]


@pytest.mark.parametrize(("definition", "good", "bad"), LARK)
@pytest.mark.parametrize("mode", ["raw", "json"])
def test_lark_grammars_match_what_lark_parses(
    vocab: Any, definition: str, good: list[str], bad: list[str], mode: Literal["raw", "json"]
) -> None:
    grammar = gbnf("lark", definition, mode)
    assert compiles(vocab, grammar), grammar
    judge = lark.Lark(definition, parser="earley", lexer="dynamic")
    for text, expected in [*((t, True) for t in good), *((t, False) for t in bad)]:
        assert lark_parses(judge, text) == expected, (text, "the lark package")
        assert (mismatch("lark", definition, text) is None) == expected, (text, "recognizer")
        written = json.dumps(text, ensure_ascii=False)[1:-1] if mode == "json" else text
        assert accepts(vocab, grammar, written) == expected, (text, grammar)


def lark_parses(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def test_ignored_whitespace_goes_between_tokens_only(vocab: Any) -> None:
    # Lark also skips it before the first token and after the last; the grammar here does
    # not let a model write it there (docs/tools.md).
    grammar = gbnf("lark", ARITHMETIC, "raw")
    assert accepts(vocab, grammar, "1 +\t2")
    assert lark_parses(lark.Lark(ARITHMETIC), " 1 ")
    assert not accepts(vocab, grammar, " 1")
    assert not accepts(vocab, grammar, "1 ")


def test_codex_apply_patch_grammar(vocab: Any) -> None:
    data = json.loads(CODEX_REQUEST.read_text())
    tool = next(t for t in data["tools"] if t["type"] == "custom")
    definition = tool["format"]["definition"]
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"
    grammar = gbnf("lark", definition, "json")
    assert compiles(vocab, grammar)
    assert accepts(vocab, grammar, json.dumps(patch)[1:-1])
    assert not accepts(vocab, grammar, json.dumps(patch.replace("***", "**"))[1:-1])
    # The lark package refuses this grammar (its /(.*)/ may match nothing); OpenAI takes it.
    assert mismatch("lark", definition, patch) is None
    assert mismatch("lark", definition, patch.replace("+x", "x")) is not None


@pytest.mark.parametrize(
    ("definition", "why"),
    [
        ('a: "x"\n', "no 'start' rule"),
        ("start: foo\n", "'foo', which is not defined"),
        ('start: "x"\nstart: "y"\n', "defined twice"),
        ('start: "x"\n%declare X\n', "%declare is not supported"),
        ('start: "x"\n%import python.NAME\n', "only terminals of Lark's 'common'"),
        ("start: X\n%import common.NOPE -> X\n", "common.NOPE"),
        ('start: "x" ~ 1001\n', "over the limit of 1000"),
        ('start: "x" ~ 3..2\n', "below"),
        ("start: /a(?=b)/\n", "lookaround"),
        ("start: /a/x\n", "flags"),
        ('start: "a".."bc"\n', "single characters"),
        ("start: A\nA: start\n", "the terminal 'A' uses the rule 'start'"),
        ("start: start\n", "only refers to itself"),
        ('start: "x" "y\n', "unexpected"),
        ('start{x}: "x"\n', "templates"),
        ('start: "x" )\n', "unexpected"),
    ],
)
def test_lark_grammars_a_grammar_cannot_enforce_are_refused(definition: str, why: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(why)):
        parse_grammar("lark", definition, max_repeat=1000)


# ---------------------------------------------------------------- on the embedded engine

DATE = InputGrammar("regex", r"^\d{4}-\d{2}-\d{2}$")
CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}


def custom_spec(name: str, grammar: InputGrammar) -> FunctionSpec:
    return FunctionSpec(name, None, CUSTOM_PARAMETERS, grammar=grammar)


@pytest.mark.parametrize("chat_format", FORMATS, ids=lambda f: f.name)
def test_custom_tool_call_grammars_compile_in_every_format(
    vocab: Any, chat_format: ChatFormat
) -> None:
    calls = [
        CallSpec("when", arguments_schema(custom_spec("when", DATE))),
        CallSpec("calc", arguments_schema(custom_spec("calc", InputGrammar("lark", ARITHMETIC)))),
    ]
    grammar = output_grammar(chat_format=chat_format, calls=calls, max_calls=2)
    assert compiles(vocab, grammar), grammar


def test_a_custom_call_is_decoded_under_its_grammar(vocab: Any) -> None:
    schema = arguments_schema(custom_spec("when", DATE))
    grammar = output_grammar(calls=[CallSpec("when", schema)], max_calls=1)

    def call(text: str) -> str:
        arguments = json.dumps({"input": text}, separators=(", ", ": "))
        return f'<tool_call>\n{{"name": "when", "arguments": {arguments}}}\n</tool_call>'

    assert accepts(vocab, grammar, call("2024-01-31"))
    assert not accepts(vocab, grammar, call("2024-1-31"))


def test_indirect_left_recursion_is_a_constraint_error_naming_the_tool(vocab: Any) -> None:
    # llama.cpp's grammar engine refuses it; prepare says so (a 400 naming tools[N].format).
    grammar = InputGrammar("lark", 'start: a\na: b "x" | "y"\nb: a "z"\n')
    turn = ChatTurn(
        model="m",
        messages=[],
        tools=[custom_spec("loop", grammar)],
        tool_choice=ToolChoice(mode="required"),
    )
    with pytest.raises(ConstraintError) as caught:
        checked_plan(turn, HERMES, None, "", vocab)
    assert caught.value.tool == "loop"
    assert caught.value.code == "invalid_grammar"


def test_the_private_grammar_keyword_is_refused_in_a_clients_schema() -> None:
    schema = {"type": "string", "x-respond-input-grammar": {"syntax": "regex", "definition": "a"}}
    assert unsupported_keyword(schema) is not None


# ---------------------------------------------------------------- at the door


@pytest.mark.parametrize(
    ("syntax", "definition"),
    [("regex", r"(a)\1"), ("regex", "a" * 1001), ("lark", 'start: "x" "y\n'), ("lark", "x: y\n")],
)
def test_a_bad_grammar_is_a_400_naming_its_definition(syntax: str, definition: str) -> None:
    tool = {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": syntax}}
    tool["format"]["definition"] = definition  # type: ignore[index]
    body = CreateResponseBody.model_validate(
        {"input": "x", "tools": [{"type": "function", "name": "f"}, tool]}
    )
    with pytest.raises(APIError) as caught:
        check_request(body, Limits())
    assert caught.value.status == 400
    assert caught.value.param == "tools[1].format.definition"
    assert caught.value.code == "invalid_grammar"


# ---------------------------------------------------------------- in front of upstreams


def test_an_upstreams_custom_input_is_checked_against_its_grammar() -> None:
    turn = ChatTurn(
        model="m",
        messages=[],
        tools=[custom_spec("when", DATE), custom_spec("calc", InputGrammar("lark", ARITHMETIC))],
    )
    strict = StrictArguments(turn)
    strict.check("when", json.dumps({"input": "2024-01-31"}))
    strict.check("calc", json.dumps({"input": "1 + (2 - 3)"}))
    for name, text in [("when", "31/01/2024"), ("calc", "1 +")]:
        with pytest.raises(EngineError) as caught:
            strict.check(name, json.dumps({"input": text}))
        assert caught.value.code == "invalid_tool_arguments"
        assert "grammar" in str(caught.value)


def test_a_responses_upstreams_custom_input_is_checked_when_the_call_is_done() -> None:
    turn = ChatTurn(model="m", messages=[], tools=[custom_spec("when", DATE)])
    translator = ResponsesTranslator(turn)

    def done(text: str) -> list[Any]:
        item = {"type": "function_call", "id": "fc", "call_id": "c", "name": "when"}
        translator.feed({"type": "response.output_item.added", "item": item})
        arguments = json.dumps({"input": text})
        return translator.feed(
            {"type": "response.output_item.done", "item": {**item, "arguments": arguments}}
        )

    assert isinstance(done("2024-01-31")[-1], ToolCallEnd)
    with pytest.raises(EngineError) as caught:
        done("tomorrow")
    assert caught.value.code == "invalid_tool_arguments"
