"""Grammars for constrained decoding, checked by llama.cpp's own grammar parser."""

from __future__ import annotations

from typing import Any

import llama_cpp
import pytest

from respond.engines.llamacpp._grammar import CallSpec, output_grammar, unsupported_keyword

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
        ({"type": "integer", "minimum": 1}, ("minimum", "minimum")),
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
            ("uniqueItems", "properties.a.uniqueItems"),
        ),
        ({"type": "string", "format": "email"}, ("format: email", "format")),
        ({"anyOf": [{"type": "string"}, {"not": {}}]}, ("not", "anyOf[1].not")),
        ({"$defs": {"X": {"multipleOf": 2}}}, ("multipleOf", "$defs.X.multipleOf")),
        ({"type": "object", "patternProperties": {}}, ("patternProperties", "patternProperties")),
    ],
)
def test_unsupported_keywords_are_named(schema: dict[str, Any], expected: tuple[str, str]) -> None:
    assert unsupported_keyword(schema) == expected


def test_supported_schema_passes() -> None:
    assert unsupported_keyword(WEATHER) is None
    assert unsupported_keyword({"type": ["string", "null"], "title": "x", "format": "date"}) is None


@pytest.fixture(scope="module")
def vocab() -> Any:
    from respond.engines.llamacpp import bundled_model_path

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    assert model
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def compiles(vocab: Any, grammar: str) -> bool:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@pytest.mark.parametrize("dialect", ["hermes", "mistral", "llama3"])
@pytest.mark.parametrize("think", [None, "open", "inside"])
def test_call_grammars_compile(vocab: Any, dialect: Any, think: Any) -> None:
    calls = [CallSpec("get_weather", WEATHER), CallSpec("anything", None)]
    grammar = output_grammar(dialect=dialect, calls=calls, max_calls=3, think=think)
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
    assert "root ::= calls" in one and "calls ::= one-call\n" in one + "\n"
