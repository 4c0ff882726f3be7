"""Grammars for constrained decoding, checked by llama.cpp's own grammar parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from respond.engines.formats import FORMATS, ChatFormat
from respond.engines.llamacpp._grammar import CallSpec, output_grammar, unsupported_keyword
from tests.support.gbnf import accepts, bundled_vocab, compiles

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "where": {"$ref": "#/$defs/Place"},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
    "$defs": {"Place": {"type": "object", "properties": {"lat": {"type": "number"}}}},
}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
            ("uniqueItems", "properties.a.uniqueItems"),
        ),
        ({"type": "string", "format": "email"}, ("format: email", "format")),
        ({"anyOf": [{"type": "string"}, {"not": {}}]}, ("not", "anyOf[1].not")),
        ({"$defs": {"X": {"contains": {}}}}, ("contains", "$defs.X.contains")),
        ({"type": "object", "patternProperties": {}}, ("patternProperties", "patternProperties")),
    ],
)
def test_unsupported_keywords_are_named(schema: dict[str, Any], expected: tuple[str, str]) -> None:
    assert unsupported_keyword(schema) == expected


def test_supported_schema_passes() -> None:
    assert unsupported_keyword(WEATHER) is None
    assert unsupported_keyword({"type": ["string", "null"], "title": "x", "format": "date"}) is None


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


@pytest.mark.parametrize("chat_format", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("think", [None, "open", "inside"])
def test_call_grammars_compile(vocab: Any, chat_format: ChatFormat, think: Any) -> None:
    calls = [CallSpec("get_weather", WEATHER), CallSpec("anything", None)]
    grammar = output_grammar(chat_format=chat_format, calls=calls, max_calls=3, think=think)
    assert compiles(vocab, grammar), grammar


def test_same_def_names_in_two_functions_do_not_clash(vocab: Any) -> None:
    other = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/Place"}},
        "$defs": {"Place": {"type": "object", "properties": {"zip": {"type": "string"}}}},
    }
    grammar = output_grammar(calls=[CallSpec("a", WEATHER), CallSpec("b", other)])
    assert '"\\"lat\\""' in grammar and '"\\"zip\\""' in grammar, grammar
    assert compiles(vocab, grammar)


def test_json_output_with_and_without_schema(vocab: Any) -> None:
    assert compiles(vocab, output_grammar(json_output=True, schema=WEATHER))
    assert compiles(vocab, output_grammar(json_output=True))
    both = output_grammar(calls=[CallSpec("f", None)], json_output=True, schema=WEATHER)
    assert compiles(vocab, both)


def test_json_strings_exclude_raw_control_characters() -> None:
    grammar = output_grammar(json_output=True, schema={"type": "string"})
    assert "\\x00-\\x1F" in grammar


def test_parallel_false_allows_exactly_one_call() -> None:
    one = output_grammar(calls=[CallSpec("f", None)], max_calls=1)
    assert "root ::= ( one-call )\n" in one + "\n"


# ---------------------------------------------------------------- numeric keywords


def around(value: float, steps: tuple[float, ...]) -> set[float]:
    return {value + sign * step for step in steps for sign in (-1, 0, 1)}


def check_values(vocab: Any, schema: dict[str, Any], values: set[float]) -> None:
    """Every value is accepted by the grammar exactly when it validates against `schema`."""
    assert unsupported_keyword(schema) is None, schema
    grammar = output_grammar(json_output=True, schema=schema)
    assert compiles(vocab, grammar), grammar
    for value in sorted(values):
        text = json_number(value, schema)
        try:
            jsonschema.validate(json.loads(text), schema)
            valid = True
        except jsonschema.ValidationError:
            valid = False
        assert accepts(vocab, grammar, text) == valid, (schema, text, valid)


def json_number(value: float, schema: dict[str, Any]) -> str:
    if schema.get("type") == "integer":
        return str(int(value))
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


INTEGER_STEPS = (1, 2, 10, 99)


@pytest.mark.parametrize(
    "bounds",
    [
        {"minimum": 3},
        {"maximum": 127},
        {"minimum": 3, "maximum": 127},
        {"minimum": -40, "maximum": -7},
        {"minimum": -12, "maximum": 1999},
        {"exclusiveMinimum": 0},
        {"exclusiveMinimum": -1, "exclusiveMaximum": 10},
        {"exclusiveMaximum": 0},
        {"minimum": 1.5, "maximum": 9.5},  # whole values only: 2..9
        {"minimum": 100, "exclusiveMaximum": 1000},
        {"minimum": 5, "maximum": 5},
    ],
)
def test_integer_bounds_accept_exactly_the_values_in_range(
    vocab: Any, bounds: dict[str, float]
) -> None:
    schema = {"type": "integer", **bounds}
    values: set[float] = set(range(-3, 4))
    for bound in bounds.values():
        values |= around(bound, INTEGER_STEPS)
    check_values(vocab, schema, {v for v in values if v == int(v)})


@pytest.mark.parametrize(
    "bounds",
    [
        {"minimum": 0.5},
        {"maximum": 2.25},
        {"minimum": 0.5, "exclusiveMaximum": 2.25},
        {"exclusiveMinimum": 0, "maximum": 1},
        {"minimum": -3.75, "maximum": -0.125},
        {"minimum": -1.5, "maximum": 12},
        {"exclusiveMinimum": 1.05, "exclusiveMaximum": 1.0625},
        {"minimum": 0},
    ],
)
def test_number_bounds_accept_exactly_the_values_in_range(
    vocab: Any, bounds: dict[str, float]
) -> None:
    schema = {"type": "number", **bounds}
    values: set[float] = {-1, -0.5, 0, 0.5, 1}
    for bound in bounds.values():
        values |= around(bound, (0.000001, 0.001, 0.01, 0.5, 1, 10))
    check_values(vocab, schema, values)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "multipleOf": 5},
        {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 100},
        {"type": "integer", "multipleOf": 3, "exclusiveMinimum": 0},
        {"type": "number", "multipleOf": 4, "maximum": 50},
    ],
)
def test_integer_multiple_of(vocab: Any, schema: dict[str, Any]) -> None:
    check_values(vocab, schema, set(range(-40, 120, 1)))


def test_number_multiple_of_a_power_of_ten_bounds_the_decimals(vocab: Any) -> None:
    schema = {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 10}
    grammar = output_grammar(json_output=True, schema=schema)
    for text, ok in [("0", True), ("9.99", True), ("10", True), ("1.5", True), ("1.234", False)]:
        assert accepts(vocab, grammar, text) == ok, text
    assert accepts(vocab, grammar, "10.01") is False
    assert accepts(vocab, grammar, "-0.01") is False


def test_safe_integer_bounds_cost_nothing(vocab: Any) -> None:
    """zod's z.number().int() sends +-(2^53-1): the plain integer rule, unchanged."""
    safe = 2**53 - 1
    zod = {"type": "integer", "minimum": -safe, "maximum": safe}
    assert output_grammar(json_output=True, schema=zod) == output_grammar(
        json_output=True, schema={"type": "integer"}
    )
    beyond = {"type": "number", "minimum": -1e300, "exclusiveMaximum": 1e300}
    assert output_grammar(json_output=True, schema=beyond) == output_grammar(
        json_output=True, schema={"type": "number"}
    )
    grammar = output_grammar(json_output=True, schema=zod)
    for text in ("0", "-9007199254740991", "9007199254740991", "42"):
        assert accepts(vocab, grammar, text), text


def test_bounds_survive_a_list_of_types(vocab: Any) -> None:
    grammar = output_grammar(json_output=True, schema={"type": ["integer", "null"], "minimum": 1})
    assert accepts(vocab, grammar, "null") and accepts(vocab, grammar, "7")
    assert not accepts(vocab, grammar, "0")


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "integer", "minimum": "3"}, "minimum: not a number"),
        ({"type": "integer", "multipleOf": 0}, "multipleOf: not positive"),
        ({"type": "number", "multipleOf": 0.3}, "multipleOf: 0.3"),
        ({"type": "integer", "multipleOf": 1000}, "multipleOf: 1000"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "minimum/maximum: no value fits"),
        ({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5}, "minimum/maximum"),
    ],
)
def test_numeric_keywords_that_cannot_be_enforced_are_named(
    schema: dict[str, Any], keyword: str
) -> None:
    found = unsupported_keyword({"type": "object", "properties": {"n": schema}})
    assert found is not None and found[0].startswith(keyword) and found[1] == "properties.n"
