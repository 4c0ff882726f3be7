"""What the server seals: reasoning and compaction items for clients to carry, and the
requests of queued background runs while the store keeps them.

Stateless clients (`store: false`, as Codex runs) cannot point at stored reasoning, so
the reasoning travels with them as an opaque blob (`include: ["reasoning.encrypted_content"]`);
a `compaction` item carries a whole context the same way. Both are AES-256-GCM
(authenticated: a changed or foreign blob fails to open) under one server key, each use
with its own associated data, so a blob made for one use never opens as another (nor a
compaction item as another tenant's). The key comes from `--secret-key` /
RESPOND_SECRET_KEY, or is generated once and kept in the data directory, so blobs stay
valid across restarts and across replicas that share the key. A queued run's request may
hold MCP credentials (`authorization`, `headers`): sealed, the store never holds them in
the clear, and any replica with the key can start the run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from respond.protocol.errors import APIError
from respond.protocol.requests import InputItem, ReasoningInput, ReasoningTextIn

__all__ = ["ENCRYPTED_INCLUDE", "Sealer", "load_key", "open_reasoning"]

ENCRYPTED_INCLUDE = "reasoning.encrypted_content"
# Associated data bound into every blob: a blob opens only for the use it was sealed for.
_REASONING = b"respond reasoning v1"
_COMPACTION = b"respond compaction v1 tenant:"  # + the tenant's name
_REQUEST = b"respond queued request v1 tenant:"  # + the tenant's name
_NONCE = 12


class Sealer:
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the sealing key must be 32 bytes")
        self._aead = AESGCM(key)

    @classmethod
    def ephemeral(cls) -> Sealer:
        """A key that lives as long as this process (apps built without a configured key)."""
        return cls(AESGCM.generate_key(bit_length=256))

    def seal(self, text: str) -> str:
        """Reasoning text as an opaque blob."""
        return self._seal(text.encode("utf-8"), _REASONING)

    def unseal(self, blob: str) -> str:
        """The sealed text; ValueError when the blob was changed or sealed by another key."""
        return self._open(blob, _REASONING).decode("utf-8")

    def seal_items(self, items: list[dict[str, Any]], tenant: str | None) -> str:
        """A compaction item's context (wire items), for `tenant` only."""
        plain = zlib.compress(json.dumps(items, separators=(",", ":")).encode("utf-8"))
        return self._seal(plain, _compaction_context(tenant))

    def unseal_items(self, blob: str, tenant: str | None) -> list[dict[str, Any]]:
        """The items of a compaction blob; ValueError when it was changed, sealed by another
        key or for another tenant."""
        plain = self._open(blob, _compaction_context(tenant))
        try:
            items: list[dict[str, Any]] = json.loads(zlib.decompress(plain))
        except (ValueError, zlib.error) as exc:
            raise ValueError("the encrypted content cannot be read") from exc
        return items

    def seal_request(self, body: dict[str, Any], tenant: str | None) -> str:
        """A queued run's create body, for `tenant` only."""
        plain = json.dumps(body, separators=(",", ":")).encode("utf-8")
        return self._seal(plain, _REQUEST + (tenant or "").encode("utf-8"))

    def unseal_request(self, blob: str, tenant: str | None) -> dict[str, Any]:
        """The create body of a queued run; ValueError when sealed by another key."""
        body: dict[str, Any] = json.loads(self._open(blob, _REQUEST + (tenant or "").encode()))
        return body

    def _seal(self, plain: bytes, context: bytes) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, plain, context)
        return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def _open(self, blob: str, context: bytes) -> bytes:
        try:
            raw = base64.urlsafe_b64decode(blob.encode("ascii"))
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], context)
        except (InvalidTag, binascii.Error, UnicodeEncodeError, ValueError) as exc:
            raise ValueError("the encrypted content cannot be opened") from exc


def _compaction_context(tenant: str | None) -> bytes:
    return _COMPACTION + (tenant or "").encode("utf-8")


def load_key(secret: str | None, data_dir: Path) -> bytes:
    """The sealing key: derived from `secret` if given, else kept in data_dir/secret.key."""
    if secret:
        return hashlib.sha256(secret.encode("utf-8")).digest()
    path = data_dir / "secret.key"
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    data_dir.mkdir(parents=True, exist_ok=True)
    key = AESGCM.generate_key(bit_length=256)
    # Create it readable by the owner only, without a window where it is not.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key.hex())
    return key


def open_reasoning(items: Sequence[InputItem], sealer: Sealer) -> list[InputItem]:
    """Input items with sealed reasoning opened into its content (400 if it won't open)."""
    out: list[InputItem] = []
    for index, item in enumerate(items):
        if isinstance(item, ReasoningInput) and item.encrypted_content:
            try:
                text = sealer.unseal(item.encrypted_content)
            except ValueError as exc:
                raise APIError(
                    400,
                    "The encrypted content of this reasoning item could not be verified: it "
                    "was changed, or sealed by another server.",
                    param=f"input[{index}].encrypted_content",
                    code="invalid_encrypted_content",
                ) from exc
            part = ReasoningTextIn(type="reasoning_text", text=text)
            item = item.model_copy(update={"content": [part]})
        out.append(item)
    return out
