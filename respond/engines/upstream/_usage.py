"""Usage for upstreams that stream none (llama-cpp-python's server ignores
`stream_options.include_usage`): counted with the upstream's own tokenizer.

- input tokens: as `count_tokens` counts them: where the server renders its chat template
  on request (llama-server's `/apply-template`), the rendered prompt through its
  tokenizer (no generation at all); else a one-token, non-streamed completion of the same
  request, whose `usage` these servers do report (its prompt is already in their prefix
  cache, so it costs little).
- output tokens: what the model wrote (text, reasoning, call arguments) through the
  tokenizer endpoint: `/tokenize` (llama-server, vLLM, SGLang) or `/extras/tokenize`
  (llama-cpp-python), at the server's root. Exact for text; for calls, the markup the
  model wrapped around the arguments is not seen, so it may count a few tokens short.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from respond.engines._base import EngineError
from respond.engines.upstream._pool import UpstreamHTTPError, UpstreamPool

__all__ = ["Tokenizer"]

log = logging.getLogger("respond.upstream")

# Each server reads its own field; the others ignore what they do not know.
_PATHS = ("/tokenize", "/extras/tokenize")


class Tokenizer:
    """The tokenizer endpoint of a pool's servers, found on first use."""

    def __init__(self, pool: UpstreamPool, model: str) -> None:
        self.pool = pool
        self.model = model
        self._path: str | None = None
        self._missing = False  # neither endpoint answered: do not ask on every turn
        self._templates = True  # until the server shows it renders no templates

    async def count_prompt(self, body: dict[str, Any], cancel: threading.Event) -> int | None:
        """The prompt tokens of a Chat Completions body, if the server renders its template
        for us (llama-server); None to count some other way."""
        if not self._templates:
            return None
        try:
            async with self.pool.stream("/apply-template", body, cancel=cancel, at_root=True) as up:
                prompt = (await up.read_json()).get("prompt")
        except UpstreamHTTPError as exc:
            self._templates = exc.upstream_status not in (404, 405, 501)
            return None
        except EngineError:
            return None
        if not isinstance(prompt, str):
            self._templates = False
            return None
        return await self.count(prompt, cancel, special=True)

    async def count(
        self, text: str, cancel: threading.Event, *, special: bool = False
    ) -> int | None:
        """How many tokens `text` is (with `special`, as the server tokenizes a prompt:
        BOS and the like added); None if it cannot tell."""
        if not text:
            return 0
        if self._missing:
            return None
        body: dict[str, Any] = {"model": self.model, "content": text, "prompt": text}
        body |= {"input": text, "add_special": special, "add_special_tokens": special}
        for path in (self._path,) if self._path else _PATHS:
            tokens = await self._ask(path, body, cancel)
            if tokens is not None:
                self._path = path
                return tokens
        log.warning("the upstream has no tokenizer endpoint (%s): usage stays null", _PATHS)
        self._missing = True
        return None

    async def _ask(self, path: str, body: Mapping[str, Any], cancel: threading.Event) -> int | None:
        try:
            async with self.pool.stream(path, body, cancel=cancel, at_root=True) as upstream:
                data = await upstream.read_json()
        except EngineError as exc:
            log.info("upstream tokenizer %s: %s", path, exc.message)
            return None
        if isinstance(data.get("count"), int):  # vLLM says it outright
            return int(data["count"])
        tokens = data.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None
