"""Sealed reasoning: authenticated, bound to the server key, key kept across restarts."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from respond.protocol.errors import APIError
from respond.protocol.requests import InputItem, InputMessage, ReasoningInput
from respond.responses.sealing import Sealer, load_key, open_reasoning


def test_seal_round_trip_and_randomized() -> None:
    sealer = Sealer.ephemeral()
    first, second = sealer.seal("plan: é"), sealer.seal("plan: é")
    assert first != second and "plan" not in first
    assert sealer.unseal(first) == sealer.unseal(second) == "plan: é"


@pytest.mark.parametrize("blob", ["", "!!!", "AAAA", "not base64 at all"])
def test_garbage_does_not_open(blob: str) -> None:
    with pytest.raises(ValueError):
        Sealer.ephemeral().unseal(blob)


def test_tampered_or_foreign_blobs_do_not_open() -> None:
    sealer = Sealer.ephemeral()
    blob = sealer.seal("secret")
    flipped = blob[:20] + ("A" if blob[20] != "A" else "B") + blob[21:]
    with pytest.raises(ValueError):
        sealer.unseal(flipped)
    with pytest.raises(ValueError):
        Sealer.ephemeral().unseal(blob)


def test_key_from_secret_or_generated_once(tmp_path: Path) -> None:
    assert load_key("s3cret", tmp_path) == load_key("s3cret", tmp_path / "other")
    assert not (tmp_path / "secret.key").exists()
    generated = load_key(None, tmp_path)
    assert load_key(None, tmp_path) == generated  # a restart keeps it
    mode = stat.S_IMODE((tmp_path / "secret.key").stat().st_mode)
    assert mode == 0o600


def test_open_reasoning_restores_content_or_names_the_item() -> None:
    sealer = Sealer.ephemeral()
    items: list[InputItem] = [
        InputMessage(role="user", content="hi"),
        ReasoningInput(type="reasoning", encrypted_content=sealer.seal("thought")),
    ]
    opened = open_reasoning(items, sealer)
    reasoning = opened[1]
    assert isinstance(reasoning, ReasoningInput) and reasoning.content is not None
    assert reasoning.content[0].text == "thought"
    with pytest.raises(APIError) as caught:
        open_reasoning(items, Sealer.ephemeral())
    assert caught.value.status == 400 and caught.value.param == "input[1].encrypted_content"


def test_compaction_blobs_open_only_for_their_tenant_and_use() -> None:
    sealer = Sealer.ephemeral()
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "é"}]}]
    blob = sealer.seal_items(items, "acme")
    assert sealer.unseal_items(blob, "acme") == items
    assert (
        Sealer(load_key("same secret", Path("."))).unseal_items(
            Sealer(load_key("same secret", Path("."))).seal_items(items, None), None
        )
        == items
    )  # replicas sharing --secret-key open each other's items
    for wrong in (lambda: sealer.unseal_items(blob, "other"), lambda: sealer.unseal(blob)):
        with pytest.raises(ValueError):
            wrong()
    with pytest.raises(ValueError):  # a reasoning blob is not a compaction item
        sealer.unseal_items(sealer.seal("thought"), None)
