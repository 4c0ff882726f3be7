"""POST /v1/embeddings: vectors from the server's embedding model (OpenAI's shapes)."""

from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from respond.api._common import JSONRoute, tenant_of
from respond.api._docs import ERRORS
from respond.files import Embedder
from respond.protocol.errors import APIError
from respond.protocol.files import EmbeddingsBody

__all__ = ["router"]

router = APIRouter(route_class=JSONRoute, tags=["embeddings"])

MAX_INPUTS = 2048  # OpenAI's limit on one request's inputs
MAX_CHARS = 64 * 1024  # one input; the model reads only its first tokens anyway


@router.post("/v1/embeddings", responses=ERRORS)
async def create_embeddings(request: Request, body: EmbeddingsBody) -> JSONResponse:
    tenant_of(request)  # authorizes
    embedder: Embedder | None = request.app.state.embedder
    if embedder is None:
        raise APIError(
            501, "This server has no embedding model (see --embedding-model).", code="unsupported"
        )
    if body.model != embedder.model:
        raise APIError(
            404,
            f"The model '{body.model[:64]}' does not exist. Embedding models: {embedder.model}.",
            param="model",
            code="model_not_found",
        )
    if body.dimensions is not None and body.dimensions != embedder.dimensions:
        raise APIError(
            400,
            f"{embedder.model} makes vectors of {embedder.dimensions} dimensions and cannot "
            "shorten them.",
            param="dimensions",
        )
    texts = _texts(body.input)
    vectors, tokens = await embedder.embed_counted(texts)
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(v, body.encoding_format)}
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return JSONResponse({"object": "list", "data": data, "model": embedder.model, "usage": usage})


def _texts(given: object) -> list[str]:
    texts = [given] if isinstance(given, str) else given
    assert isinstance(texts, list)
    if not texts:
        raise APIError(400, "'input' must not be empty.", param="input")
    if len(texts) > MAX_INPUTS:
        raise APIError(400, f"'input' has more than {MAX_INPUTS} texts.", param="input")
    for i, text in enumerate(texts):
        where = "input" if isinstance(given, str) else f"input[{i}]"
        if not isinstance(text, str):
            raise APIError(400, "Token arrays are not supported: send text.", param=where)
        if not text:
            raise APIError(400, "An input must not be an empty string.", param=where)
        if len(text) > MAX_CHARS:
            raise APIError(400, f"An input is longer than {MAX_CHARS} characters.", param=where)
    return [text for text in texts if isinstance(text, str)]


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":  # float32, little-endian, as OpenAI sends them
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
    return vector
