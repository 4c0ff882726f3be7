"""Embeddings from an upstream server's `POST /embeddings` (OpenAI's shape): vLLM,
llama-server `--embedding`, Ollama, OpenAI itself (the `[embeddings]` table, docs/files.md).

The size of its vectors is learnt at start from one probe, which also checks that the
upstream serves the model. Vectors are normalized here: not every server returns unit
vectors, and search compares them by cosine. A failing upstream is a 502
(`upstream_error`, with its message) or a 504 (`upstream_timeout`), as for upstream models.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import numpy as np

from respond.protocol.errors import APIError

__all__ = ["UpstreamEmbedder", "upstream_embedder"]

BATCH = 64  # texts per upstream request: an indexed file's chunks go in several


class UpstreamEmbedder:
    def __init__(
        self,
        url: str,
        upstream_model: str,
        *,
        model: str,
        dimensions: int = 0,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_chars: int | None = None,
    ) -> None:
        self.model = model  # the name clients send and see
        self.dimensions = dimensions
        self._url = url.rstrip("/") + "/embeddings"
        self._upstream_model = upstream_model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._max_chars = max_chars
        self._client: httpx.AsyncClient | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors, _ = await self.embed_counted(texts)
        return vectors

    async def embed_counted(self, texts: list[str]) -> tuple[list[list[float]], int]:
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), BATCH):
            data = await self._post(texts[start : start + BATCH])
            more, used = _parse(data, len(texts[start : start + BATCH]))
            vectors += more
            tokens += used
        return vectors, tokens

    async def _post(self, texts: list[str]) -> Any:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
        if self._max_chars is not None:  # respond has no tokenizer of the upstream's model
            texts = [text[: self._max_chars] for text in texts]
        body = {"model": self._upstream_model, "input": texts, "encoding_format": "float"}
        try:
            reply = await self._client.post(self._url, json=body)
        except httpx.TimeoutException:
            raise APIError(
                504, f"The embedding upstream {self._url} timed out.", code="upstream_timeout"
            ) from None
        except httpx.HTTPError as exc:
            raise _failed(f"The embedding upstream {self._url} is unreachable: {exc}") from None
        if reply.status_code != 200:
            raise _failed(f"The embedding upstream answered {reply.status_code}: {_message(reply)}")
        try:
            return reply.json()
        except ValueError:
            raise _failed("The embedding upstream answered something that is not JSON.") from None


def upstream_embedder(
    url: str,
    upstream_model: str,
    *,
    model: str,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_chars: int | None = None,
    start_wait: float = 30.0,
) -> UpstreamEmbedder:
    """The embedder, its vector size probed now, waiting up to `start_wait` seconds for the
    upstream (one started alongside respond may need a moment, a vLLM minutes).

    Raises ValueError with the upstream's answer when it never serves one vector.
    """
    embedder = UpstreamEmbedder(
        url, upstream_model, model=model, api_key=api_key, timeout=timeout, max_chars=max_chars
    )
    body = {"model": upstream_model, "input": ["dimensions"], "encoding_format": "float"}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + start_wait
    while True:
        try:
            reply = httpx.post(embedder._url, json=body, headers=headers, timeout=timeout)
            break
        except httpx.HTTPError as exc:
            if time.monotonic() > deadline:
                raise ValueError(f"{embedder._url} is unreachable: {exc}") from None
            time.sleep(1.0)
    if reply.status_code != 200:
        raise ValueError(f"{embedder._url} answered {reply.status_code}: {_message(reply)}")
    try:
        vectors, _ = _parse(reply.json(), 1)
    except (ValueError, APIError) as exc:
        raise ValueError(f"{embedder._url}: {exc}") from None
    embedder.dimensions = len(vectors[0])
    return embedder


def _parse(data: Any, count: int) -> tuple[list[list[float]], int]:
    """The unit vectors, in input order, and the tokens of an OpenAI embeddings answer."""
    try:
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        vectors = [np.asarray(item["embedding"], dtype=np.float64) for item in items]
    except (KeyError, TypeError, ValueError):
        raise _failed("The embedding upstream's answer is not OpenAI's embeddings list.") from None
    if len(vectors) != count or any(v.ndim != 1 or not v.size for v in vectors):
        raise _failed(f"The embedding upstream returned {len(vectors)} vectors for {count} texts.")
    usage = data.get("usage") or {}
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return [_unit(v) for v in vectors], int(tokens) if isinstance(tokens, int) else 0


def _unit(vector: np.ndarray) -> list[float]:
    norm = float(np.linalg.norm(vector))
    return [float(x) for x in (vector / norm if norm else vector)]


def _message(reply: httpx.Response) -> str:
    try:
        error = reply.json().get("error")
        text = error.get("message", error) if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        text = None
    return str(text or reply.text or reply.reason_phrase)[:500]


def _failed(message: str) -> APIError:
    return APIError(502, message, code="upstream_error")
