"""Tenants (`--api-key-file` lines `name:key`): stored objects belong to the key's tenant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import openai
import pytest
from openai.types.responses import ResponseInputItemParam

from tests.support.clients import openai_client
from tests.support.schema import validate_response
from tests.support.server import Server, start_server

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("tenants"))
    keys = tmp / "keys.txt"
    keys.write_text("# tenants\nalice:key-alice\nbob:key-bob\nalice:key-alice-2\n")
    srv = start_server(tmp, "--threads", "2", "--api-key-file", str(keys))
    yield srv
    srv.stop()


def sdk(server: Server, key: str) -> openai.OpenAI:
    return openai_client(server.base_url, key)


def test_another_tenant_sees_nothing(server: Server) -> None:
    with sdk(server, "key-alice") as alice, sdk(server, "key-bob") as bob:
        made = alice.responses.create(model=MODEL, input="Hi", max_output_tokens=8)
        validate_response(made.model_dump(mode="json", exclude_unset=True))
        conv = alice.conversations.create(items=[{"role": "user", "content": "secret"}])
        (item,) = alice.conversations.items.list(conv.id).data
        assert item.id is not None

        for attempt in (
            lambda: bob.responses.retrieve(made.id),
            lambda: bob.responses.delete(made.id),
            lambda: bob.responses.input_items.list(made.id),
            lambda: bob.responses.cancel(made.id),
            lambda: bob.responses.create(model=MODEL, input="x", previous_response_id=made.id),
            lambda: bob.responses.create(
                model=MODEL, input=[{"type": "item_reference", "id": item.id}]
            ),
            lambda: bob.responses.input_tokens.count(model=MODEL, conversation=conv.id),
            lambda: bob.conversations.retrieve(conv.id),
            lambda: bob.conversations.update(conv.id, metadata={"x": "y"}),
            lambda: bob.conversations.items.list(conv.id),
            lambda: bob.conversations.items.retrieve(item.id, conversation_id=conv.id),
            lambda: bob.conversations.items.delete(item.id, conversation_id=conv.id),
            lambda: bob.conversations.items.create(
                conv.id, items=[{"role": "user", "content": "x"}]
            ),
            lambda: bob.conversations.delete(conv.id),
        ):
            with pytest.raises(openai.NotFoundError):
                attempt()
        replay = httpx.get(
            f"{server.base_url}/responses/{made.id}",
            params={"stream": "true"},
            headers={"Authorization": "Bearer key-bob"},
        )
        assert replay.status_code == 404

        # Nothing of Alice's was touched, and her second key is the same tenant.
        with sdk(server, "key-alice-2") as alice2:
            assert alice2.responses.retrieve(made.id).id == made.id
            assert alice2.conversations.retrieve(conv.id).metadata == {}
            assert [i.id for i in alice2.conversations.items.list(conv.id).data] == [item.id]
        chained = alice.responses.create(
            model=MODEL, input="Again", previous_response_id=made.id, max_output_tokens=8
        )
        assert chained.previous_response_id == made.id


def test_compaction_items_open_only_for_their_tenant(server: Server) -> None:
    with (
        openai_client(server.base_url, "key-alice") as alice,
        openai_client(server.base_url, "key-bob") as bob,
    ):
        sealed = alice.responses.compact(model=MODEL, input="Alice's secret plan.")
        # An output item goes back in as an input item: the SDK types the two apart.
        item = cast(
            ResponseInputItemParam, sealed.output[-1].model_dump(mode="json", exclude_none=True)
        )
        assert alice.responses.input_tokens.count(model=MODEL, input=[item]).input_tokens > 0
        with pytest.raises(openai.BadRequestError) as refused:
            bob.responses.input_tokens.count(model=MODEL, input=[item])
        assert refused.value.body["code"] == "invalid_encrypted_content"  # type: ignore[index]


def test_wrong_key_is_401(server: Server) -> None:
    with sdk(server, "nope") as stranger, pytest.raises(openai.AuthenticationError):
        stranger.responses.retrieve("resp_1")
