"""The served OpenAPI document describes the real routes, and a request built from it works."""

from __future__ import annotations

from typing import Any

import httpx
from openapi_spec_validator import validate as validate_openapi

from tests.support.schema import validate_response
from tests.support.server import Server

# Typed request bodies, by route: what FastAPI documents is what the route validates.
BODIES = {
    ("post", "/v1/responses"): "CreateResponseBody",
    ("post", "/v1/responses/input_tokens"): "CreateResponseBody",
    ("post", "/v1/responses/compact"): "CompactBody",
    ("post", "/v1/conversations"): "ConversationCreateBody",
    ("post", "/v1/conversations/{conversation_id}"): "MetadataBody",
    ("post", "/v1/conversations/{conversation_id}/items"): "ConversationItemsBody",
    ("post", "/v1/chat/completions"): "ChatBody",
}
# Fields of CreateResponseBody a generated request leaves out: they name stored state that
# does not exist (previous_response_id, conversation) or need other fields (background).
NEEDS_STATE = {"previous_response_id", "conversation", "background", "stream", "model"}


def document(server: Server) -> dict[str, Any]:
    reply = httpx.get(f"{server.url}/openapi.json", timeout=10)
    assert reply.status_code == 200
    doc: dict[str, Any] = reply.json()
    return doc


def test_the_document_is_valid_openapi_with_every_request_body(server: Server) -> None:
    doc = document(server)
    validate_openapi(doc)
    for (method, path), schema in BODIES.items():
        body = doc["paths"][path][method]["requestBody"]
        ref = body["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{schema}", (method, path)
    fields = doc["components"]["schemas"]["CreateResponseBody"]["properties"]
    # Open Responses fields and the OpenAI extensions respond accepts are both documented.
    for name in ("input", "tools", "tool_choice", "text", "reasoning", "previous_response_id"):
        assert name in fields
    for name in ("conversation", "prompt_cache_key", "safety_identifier", "seed"):
        assert name in fields
    errors = doc["paths"]["/v1/responses"]["post"]["responses"]["4XX"]
    assert errors["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


def test_the_docs_pages_are_served_without_a_cdn(server: Server) -> None:
    page = httpx.get(f"{server.url}/docs", timeout=10)
    assert page.status_code == 200
    assert "/openapi.json" in page.text
    assert "cdn." not in page.text  # everything it loads comes from respond itself


def test_a_request_built_from_the_document_is_accepted(server: Server) -> None:
    doc = document(server)
    schemas = doc["components"]["schemas"]
    fields = schemas["CreateResponseBody"]["properties"]
    body = {
        name: example(schema, schemas) for name, schema in fields.items() if name not in NEEDS_STATE
    }
    body.update(model="smollm2-135m", input="Say hi.", max_output_tokens=4, stream=False)
    reply = httpx.post(f"{server.base_url}/responses", json=body, timeout=120)
    assert reply.status_code == 200, (body, reply.text)
    validate_response(reply.json())


def example(schema: dict[str, Any], schemas: dict[str, Any]) -> Any:
    """The simplest value a schema admits (first branch of a union, lowest bound, no items)."""
    if "$ref" in schema:
        return example(schemas[schema["$ref"].rsplit("/", 1)[-1]], schemas)
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            branches = [b for b in schema[union] if b.get("type") != "null"]
            return example(branches[0], schemas)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "string":
        return "example"
    if kind == "integer":
        return int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
    if kind == "number":
        if "minimum" in schema:
            return schema["minimum"]
        low = schema.get("exclusiveMinimum", 0)
        return (low + schema.get("maximum", low + 2)) / 2
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    return {}
