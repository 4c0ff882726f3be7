"""Usage for upstreams that stream none (llama-cpp-python's server ignores
`stream_options.include_usage`): counted with the upstream's own tokenizer.

- input tokens: a one-token, non-streamed completion of the same request, whose `usage`
  these servers do report (its prompt is already in their prefix cache, so it costs
  little); this is also how `count_tokens` counts.
- output tokens: what the model wrote (text, reasoning, call arguments) through the
  tokenizer endpoint: `/tokenize` (llama-server, vLLM, SGLang) or `/extras/tokenize`
  (llama-cpp-python), at the server's root. Exact for text; for calls, the markup the
  model wrapped around the arguments is not seen, so it may count a few tokens short.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from respond.engines._base import EngineError
from respond.engines.upstream._pool import UpstreamPool

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

    async def count(self, text: str, cancel: threading.Event) -> int | None:
        """How many tokens `text` is (no special tokens added); None if it cannot tell."""
        if not text:
            return 0
        if self._missing:
            return None
        body = {"model": self.model, "content": text, "prompt": text, "input": text}
        for path in (self._path,) if self._path else _PATHS:
            tokens = await self._ask(path, body, cancel)
            if tokens is not None:
                self._path = path
                return tokens
        log.warning("the upstream has no tokenizer endpoint (%s): usage stays null", _PATHS)
        self._missing = True
        return None

    async def _ask(self, path: str, body: dict[str, Any], cancel: threading.Event) -> int | None:
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
