"""Images without a model: the placeholders an image stands as in a token list (_media.py),
and where the run reads images from (responses/images.py): the file store, a fetch within
the allow-list (never of a refused URL), or the data URL as sent."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from respond.engines._base import ChatMessage, ChatTurn, EngineError
from respond.engines.formats import Chosen
from respond.engines.llamacpp._job import Feed, Job
from respond.engines.llamacpp._media import (
    data_url_bytes,
    image_key,
    placeholders,
    shift_of,
    whole_images,
)
from respond.engines.llamacpp._model import NativeModel
from respond.engines.llamacpp._on_demand import mmproj_beside
from respond.engines.llamacpp._prompt import render_prompt
from respond.engines.llamacpp._slot import Slot
from respond.engines.llamacpp._slots import fill_batch
from respond.engines.llamacpp._template import ChatTemplate
from respond.protocol.errors import APIError
from respond.protocol.requests import (
    ComputerCallOutputInput,
    InputImage,
    InputItem,
    InputMessage,
)
from respond.responses.images import ImagePolicy, ImageSources
from tests.support.slots import native_batch

PNG = b"\x89PNG\r\n\x1a\nfake"
DATA = "data:image/png;base64," + base64.b64encode(PNG).decode()


# ------------------------------------------------------------ placeholders


def test_an_image_stands_as_placeholders_no_token_and_no_other_image_has() -> None:
    red, blue = placeholders(5, 4), placeholders(6, 4)
    assert all(t < 0 for t in red) and not set(red) & set(blue)
    assert [image_key(t) for t in red] == [5, None, None, None]
    assert image_key(12) is None


def test_cells_are_never_kept_for_part_of_an_image() -> None:
    tokens = [1, 2, *placeholders(5, 4), 3]
    assert whole_images(tokens, 4) == 2  # inside the image: back to its start
    assert whole_images(tokens, 2) == 2 and whole_images(tokens, 6) == 6
    assert whole_images(tokens, 1) == 1


def test_a_data_url_gives_its_bytes_and_any_other_url_is_refused() -> None:
    assert data_url_bytes(DATA) == PNG
    assert data_url_bytes("data:text/plain,a%20b") == b"a b"
    with pytest.raises(EngineError) as refused:
        data_url_bytes("https://example.com/a.png")
    assert refused.value.status == 400


def test_a_projector_beside_a_model_is_found_by_its_name(tmp_path: Any) -> None:
    for name in ("gemma-3-4b-it-Q4_K_M", "mmproj-gemma-3-4b-it-F16", "other-Q8_0", "mmproj-F16"):
        (tmp_path / f"{name}.gguf").write_bytes(b"")
    assert mmproj_beside(tmp_path / "gemma-3-4b-it-Q4_K_M.gguf") == (
        tmp_path / "mmproj-gemma-3-4b-it-F16.gguf"
    )
    assert mmproj_beside(tmp_path / "other-Q8_0.gguf") is None


# ------------------------------------------------------------ where images come from


class Files:
    async def file_content(
        self, tenant: str | None, file_id: str
    ) -> tuple[dict[str, Any], bytes] | None:
        if (tenant, file_id) == ("t1", "file-a"):
            return {"id": file_id, "filename": "shot.png"}, PNG
        return None


class Network(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.fetched: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.fetched.append(str(request.url))
        return httpx.Response(200, content=PNG, headers={"content-type": "image/png"})


def message(*parts: dict[str, Any]) -> InputMessage:
    return InputMessage.model_validate({"role": "user", "content": [*parts]})


def url_of(item: InputItem, part: int) -> str | None:
    assert isinstance(item, InputMessage) and not isinstance(item.content, str)
    image = item.content[part]
    assert isinstance(image, InputImage)
    return image.image_url


def resolve(
    sources: ImageSources, items: list[InputItem], *, fetch_urls: bool = True, tenant: str = "t1"
) -> list[InputItem]:
    return asyncio.run(sources.resolve(items, tenant=tenant, fetch_urls=fetch_urls))


def test_an_image_by_file_id_is_read_from_the_tenants_files() -> None:
    sources = ImageSources(Files())
    shot = ComputerCallOutputInput.model_validate(
        {"type": "computer_call_output", "call_id": "c1",
         "output": {"type": "computer_screenshot", "file_id": "file-a"}}
    )  # fmt: skip
    items: list[InputItem] = [message({"type": "input_image", "file_id": "file-a"}), shot]
    first, second = resolve(sources, items)
    assert url_of(first, 0) == DATA
    assert isinstance(second, ComputerCallOutputInput) and second.output.image_url == DATA
    with pytest.raises(APIError) as missing:
        resolve(sources, items, tenant="t2")  # another tenant's file is missing
    assert missing.value.status == 404 and missing.value.param == "input[0].content[0].file_id"


def test_a_url_is_fetched_only_when_the_allow_list_admits_it() -> None:
    network = Network()
    policy = ImagePolicy(allow=("images.example", "https://cdn.example/pub/"))
    sources = ImageSources(None, policy, transport=network)
    allowed = [message({"type": "input_image", "image_url": "https://images.example/a.png"})]
    assert url_of(resolve(sources, list(allowed))[0], 0) == DATA
    assert network.fetched == ["https://images.example/a.png"]
    for url in (
        "https://cdn.example/private/a.png",  # beside the prefix
        "http://evil.example/a.png",
        "http://127.0.0.1/a.png",  # loopback: never, by default
        "http://10.0.0.7/a.png",  # a private network
        "http://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
    ):
        items: list[InputItem] = [
            message(
                {"type": "input_image", "image_url": "https://images.example/b.png"},
                {"type": "input_image", "image_url": url},
            )
        ]
        with pytest.raises(APIError) as refused:
            resolve(sources, items)
        assert refused.value.status == 400 and refused.value.code == "image_url_not_allowed"
        assert refused.value.param == "input[0].content[1].image_url"
    assert network.fetched == ["https://images.example/a.png"]  # nothing more: checked first


def test_private_addresses_need_the_switch_and_a_pattern() -> None:
    network = Network()
    policy = ImagePolicy(allow=("127.0.0.1",), allow_private=True)
    sources = ImageSources(None, policy, transport=network)
    local = [message({"type": "input_image", "image_url": "http://127.0.0.1:9/a.png"})]
    assert url_of(resolve(sources, list(local))[0], 0) == DATA
    with pytest.raises(APIError):
        resolve(sources, [message({"type": "input_image", "image_url": "http://10.0.0.7/a"})])


def test_an_upstream_gets_the_url_and_a_data_url_stays() -> None:
    network = Network()
    sources = ImageSources(Files(), transport=network)
    items: list[InputItem] = [
        message(
            {"type": "input_image", "image_url": "http://127.0.0.1/a.png"},
            {"type": "input_image", "image_url": DATA},
        )
    ]
    kept = resolve(sources, items, fetch_urls=False)
    assert url_of(kept[0], 0) == "http://127.0.0.1/a.png" and url_of(kept[0], 1) == DATA
    assert network.fetched == []


def test_each_image_is_marked_before_its_messages_text() -> None:
    """The template gets a message's content as a string: its images' markers come first,
    where the engine reads the images in; a message without images is as it was."""
    turn = ChatTurn(
        model="m",
        messages=[
            ChatMessage("user", "two pictures", images=("data:a", "data:b")),
            ChatMessage("assistant", "seen"),
            ChatMessage("user", "plain"),
        ],
    )
    chosen = Chosen(None, None, "fallback")
    prompt = render_prompt(ChatTemplate(None), turn, chosen=chosen, marker="<m>")
    assert "<|im_start|>user\n<m><m>\ntwo pictures<|im_end|>" in prompt
    assert prompt.count("<m>") == 2 and "<|im_start|>user\nplain<|im_end|>" in prompt
    assert "<m>" not in render_prompt(ChatTemplate(None), turn, chosen=chosen)


def test_an_image_takes_its_positions_not_one_a_placeholder() -> None:
    """On a model with M-RoPE an image takes fewer positions than it has embeddings: the
    text after it goes on from its last position, and cells are dropped by position."""
    flat, rope = placeholders(5 * 2**20 + 4, 4), placeholders(6 * 2**20 + 2, 4)
    assert shift_of([1, *flat, 2]) == 0 and shift_of([1, *rope, 2, *rope]) == 4
    kept: list[tuple[int, int]] = []
    model = cast(NativeModel, SimpleNamespace(keep=lambda seq, n: kept.append((seq, n))))
    slot = Slot(0, held=[1, *rope, 2, 3], shift=2)
    assert slot.position == 5  # 7 tokens in 5 positions
    slot.apply(Feed([1, *rope, 2, 9], fresh=True), model)
    assert kept == [(0, 4)] and slot.held == [1, *rope, 2] and slot.shift == 2
    with native_batch(4) as batch:
        slot.job = cast(Job, SimpleNamespace(arrived=0.0))
        fill_batch(batch, [slot], room=4)
        assert (batch.token[0], batch.pos[0]) == (9, 4)
