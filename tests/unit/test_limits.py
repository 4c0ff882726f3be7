"""Request limits: the body walk, schema and regex limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from respond.protocol.errors import APIError, from_validation_error
from respond.protocol.limits import Limits, check_id, check_json, load_json
from respond.protocol.requests import CreateResponseBody
from respond.protocol.schema_limits import SchemaBudget, check_regex, check_schema
from respond.responses.limits import check_request

LIMITS = Limits()


def refused(call: Any, *args: Any, **kwargs: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        call(*args, **kwargs)
    assert caught.value.status == 400
    assert caught.value.code
    return caught.value


def test_lone_surrogates_and_nul_are_named_by_their_path() -> None:
    assert refused(check_json, {"input": [{"content": "a\ud800"}]}, LIMITS).param == (
        "input[0].content"
    )
    assert refused(check_json, {"metadata": {"k": "\x00"}}, LIMITS).param == "metadata.k"
    # A bad key is shown escaped, so the error itself can be encoded.
    error = refused(check_json, {"metadata": {"\udc00": "v"}}, LIMITS)
    assert error.param == "metadata.\\udc00"
    json.dumps(error.body()).encode("utf-8")
    check_json({"input": "ordinary text, é, 😀"}, LIMITS)


def test_nesting_is_limited_without_recursion() -> None:
    deep: Any = "x"
    for _ in range(LIMITS.body_depth + 1):
        deep = [deep]
    assert "nested" in refused(check_json, {"a": deep}, LIMITS).message
    raw = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert refused(load_json, raw, LIMITS, "request body").code == "invalid_json"


def test_ids_are_bounded_and_printable() -> None:
    check_id("resp_abc", "response_id", LIMITS)
    for bad in ("resp_" + "a" * 300, "resp_\x00", "resp_\ud800"):
        assert refused(check_id, bad, "response_id", LIMITS).param == "response_id"


def schema_error(schema: Any) -> APIError:
    budget = SchemaBudget(LIMITS.schema_nodes)
    return refused(check_schema, schema, "text.format.schema", LIMITS, budget, code="c")


def test_schema_bounds_over_the_limit_name_the_keyword() -> None:
    error = schema_error({"type": "object", "properties": {"a": {"maxLength": 20_000}}})
    assert error.param == "text.format.schema"
    assert "text.format.schema.properties.a.maxLength" in error.message
    assert "1000" in error.message
    for keyword in ("minLength", "maxItems", "minItems"):
        schema_error({keyword: 10**9})
    schema_error({"maxLength": 1.5})
    schema_error({"enum": list(range(LIMITS.enum_values + 1))})


def test_schema_depth_and_size() -> None:
    deep: Any = {"type": "string"}
    for _ in range(LIMITS.schema_depth):
        deep = {"type": "array", "items": deep}
    assert "levels deep" in schema_error(deep).message
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6000)}}
    assert "keywords" in schema_error(wide).message


def test_schemas_within_the_limits_pass() -> None:
    budget = SchemaBudget(LIMITS.schema_nodes)
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 1000, "pattern": "^[a-z]+$"}},
        "$defs": {"n": {"type": "integer"}},
    }
    check_schema(schema, "p", LIMITS, budget, code="c")


@pytest.mark.parametrize(
    "pattern",
    ["x{0,65536}", "([", "(?=a)a", "(?<n>a)", "(a)\\1", "a" * 1001, "(?i)a", "a{1001,}"],
)
def test_regexes_a_grammar_cannot_enforce_are_refused(pattern: str) -> None:
    error = refused(check_regex, pattern, "tools[0].format.definition", LIMITS, code="g")
    assert error.param == "tools[0].format.definition"


@pytest.mark.parametrize("pattern", ["^[a-z]{1,10}$", "a[(?]b", "\\d{3}-\\d{4}", "x{0,1000}"])
def test_regexes_within_the_limits_pass(pattern: str) -> None:
    check_regex(pattern, "p", LIMITS, code="g")


def test_request_counts() -> None:
    items = [{"role": "user", "content": "x"}] * (LIMITS.input_items + 1)
    body = CreateResponseBody.model_validate({"input": items})
    assert refused(check_request, body, LIMITS).param == "input"
    tools = [{"type": "function", "name": f"f{i}"} for i in range(LIMITS.tools + 1)]
    body = CreateResponseBody.model_validate({"input": "x", "tools": tools})
    assert refused(check_request, body, LIMITS).param == "tools"
    # A malformed tool is refused at the door, where the body is parsed (tools are typed).
    data = {"input": "x", "tools": [{"type": "custom", "name": "c", "format": "regex"}]}
    with pytest.raises(ValidationError) as caught:
        CreateResponseBody.model_validate(data)
    assert from_validation_error(caught.value, data).param == "tools[0].format"
