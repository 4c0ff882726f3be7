"""Containers on two replicas sharing one PostgreSQL schema (docs/deploy.md).

A container's files are on the disk of the replica that made it: the other replica lists and
reads the container and its files' metadata, and deletes it, but anything needing the
files (their bytes, a new file, code run in it) answers 409 naming the replica that holds
it. The replicas are respond's server over the FAKE engine (no model is needed to manage
containers), each with its own data dir, as separate processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from tests.support.clients import openai_client
from tests.support.fake_server import start_fake_server
from tests.support.server import Server
from tests.support.stores import drop_schema, new_schema_url

# Runs code in the sandbox: on the one worker that does (tests/support/workers.py).
pytestmark = [pytest.mark.pg, pytest.mark.sandbox]

SCRIPT = [[{"text": "Done."}]]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, Path]]:
    url, schema = new_schema_url()
    tmp = Path(tmp_path_factory.mktemp("replicas"))
    flags = ("--store", url, "--code-interpreter")
    a, _ = start_fake_server(tmp / "a", SCRIPT, flags=flags)
    b, _ = start_fake_server(tmp / "b", SCRIPT, flags=flags)
    yield a, b, tmp
    a.stop()
    b.stop()
    asyncio.run(drop_schema(schema))


def test_another_replica_reads_a_container_and_names_its_holder_for_the_rest(
    pair: tuple[Server, Server, Path],
) -> None:
    a, b, tmp = pair
    holder = (tmp / "a" / "data" / "containers" / "replica").read_text().strip()
    with openai_client(a.base_url) as on_a, openai_client(b.base_url) as on_b:
        made = on_a.containers.create(name="shared")
        file = on_a.containers.files.create(made.id, file=("n.txt", b"42"))
        assert on_b.containers.retrieve(made.id).model_dump() == made.model_dump()
        assert made.id in [c.id for c in on_b.containers.list()]
        assert [f.id for f in on_b.containers.files.list(made.id)] == [file.id]
        assert on_b.containers.files.retrieve(file.id, container_id=made.id).bytes == 2
        refusals: list[Callable[[], object]] = [
            lambda: on_b.containers.files.content.retrieve(file.id, container_id=made.id),
            lambda: on_b.containers.files.create(made.id, file=("m.txt", b"x")),
            lambda: on_b.containers.files.delete(file.id, container_id=made.id),
            lambda: on_b.responses.create(
                model="fake-model",
                input="Run it.",
                tools=[{"type": "code_interpreter", "container": made.id}],
            ),
        ]
        for refused in refusals:
            with pytest.raises(openai.ConflictError) as raised:
                refused()
            error = raised.value.body
            assert isinstance(error, dict) and error["code"] == "container_on_other_replica"
            assert holder in error["message"]
        assert on_a.containers.files.content.retrieve(file.id, container_id=made.id).read() == b"42"
        on_b.containers.delete(made.id)  # the holder sweeps its folder
        with pytest.raises(openai.NotFoundError):
            on_a.containers.retrieve(made.id)


def test_concurrent_uploads_to_one_container_are_all_kept(
    pair: tuple[Server, Server, Path],
) -> None:
    a, _, tmp = pair
    with openai_client(a.base_url) as on_a:
        made = on_a.containers.create(name="busy")

        def upload(n: int) -> str:
            return on_a.containers.files.create(made.id, file=(f"f{n}.txt", b"%d" % n)).id

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(upload, range(16)))
        listed = on_a.containers.files.list(made.id, limit=100)
        assert sorted(f.id for f in listed.data) == sorted(ids)
        folder = tmp / "a" / "data" / "containers" / made.id
        assert sorted(p.name for p in folder.iterdir()) == sorted(f"f{n}.txt" for n in range(16))
