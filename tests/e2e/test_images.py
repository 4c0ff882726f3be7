"""Images on the embedded engine (#34), through llama.cpp's multimodal library for real: the
bundled model served with a projector the test writes (tests/support/mmproj.py: a small CLIP
tower with random weights), beside the same model without one, in one server.

Its answers mean nothing; the tests assert the path: an image by data URL or file_id is read
by the projector and counted in usage, streams and is stored, a chained turn reuses the
image's cells, another image never does, a URL is fetched only from an allowed host (and a
refused one is never fetched), and the other front doors (Chat Completions, Messages) reach
the same path. One slot each, so that a prompt meets the cells the previous one left.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.mmproj import IMAGE_TOKENS, png, write_mmproj
from tests.support.server import Server, start_server

TIMEOUT = 300  # a loaded two-core machine is slow; never a timed assertion
RED = png(40, 30, (255, 0, 0))
BLUE = png(40, 30, (0, 0, 255))


def data_url(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode()


class Images(ThreadingHTTPServer):
    """Serves RED at every path, counting the requests per path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(RED)))
                self.end_headers()
                self.wfile.write(RED)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def images() -> Iterator[Images]:
    served = Images()
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, images: Images) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("images")
    mmproj = write_mmproj(tmp / "mmproj-test.gguf")
    config = tmp / "respond.toml"
    config.write_text(
        f'[models.eyes]\ngguf = "bundled"\nmmproj = "{mmproj}"\nparallel = 1\n\n'
        '[models.blind]\ngguf = "bundled"\nparallel = 1\n'
    )
    running = start_server(
        tmp, "--config", str(config), "--embedding-model", "none",
        "--image-allow", f"{images.url}/allowed/", "--image-allow-private",
    )  # fmt: skip
    yield running
    running.stop()


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "Describe it."}, *parts]}]


def image(url: str) -> dict[str, Any]:
    return {"type": "input_image", "image_url": url}


def ask(server: Server, input: Any, model: str = "eyes", **extra: Any) -> httpx.Response:
    body = {"model": model, "input": input, "max_output_tokens": 3, "temperature": 0, **extra}
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=TIMEOUT)


def usage(reply: httpx.Response) -> tuple[int, int]:
    """(input tokens, cached tokens) of a reply that must have succeeded."""
    assert reply.status_code == 200, reply.text
    counted = reply.json()["usage"]
    return counted["input_tokens"], counted["input_tokens_details"]["cached_tokens"]


def test_models_say_which_reads_images(server: Server) -> None:
    listed = httpx.get(f"{server.base_url}/models", timeout=30).json()
    vision = {m["id"]: m["meta"]["vision"] for m in listed["data"]}
    assert vision == {"eyes": True, "blind": False}
    capabilities = {m["name"]: m["capabilities"] for m in listed["models"]}
    assert capabilities["eyes"] == ["completion", "multimodal"]
    assert "projector" in server.log() and "'eyes' reads images" in server.log()
    assert "reads images" in next(line for line in server.log().splitlines() if "eyes (" in line)


def test_an_image_by_data_url_is_read_and_counted(server: Server) -> None:
    text_only, _ = usage(ask(server, user()))
    with_image, _ = usage(ask(server, user(image(data_url(RED)))))
    # The image's embeddings, and the newline after its marker.
    assert IMAGE_TOKENS <= with_image - text_only <= IMAGE_TOKENS + 2
    assert f"an image of {IMAGE_TOKENS} tokens decoded" in server.log()
    counted = httpx.post(
        f"{server.base_url}/responses/input_tokens",
        json={"model": "eyes", "input": user(image(data_url(RED)))},
        timeout=TIMEOUT,
    )
    assert counted.status_code == 200, counted.text
    assert counted.json()["input_tokens"] == with_image


def test_an_image_streams_and_is_stored(server: Server) -> None:
    body = {"model": "eyes", "input": user(image(data_url(BLUE))), "max_output_tokens": 3}
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{server.base_url}/responses", json={**body, "stream": True}, timeout=TIMEOUT
    ) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    final = events[-1]["response"]
    assert events[-1]["type"] in ("response.completed", "response.incomplete")
    assert final["usage"]["input_tokens"] > IMAGE_TOKENS
    items = httpx.get(f"{server.base_url}/responses/{final['id']}/input_items", timeout=30)
    parts = items.json()["data"][0]["content"]
    assert parts[1] == {"type": "input_image", "image_url": data_url(BLUE), "detail": None} or (
        parts[1]["type"] == "input_image" and parts[1]["image_url"] == data_url(BLUE)
    )


def test_an_image_by_file_id_is_read_from_the_file_store(server: Server) -> None:
    made = httpx.post(
        f"{server.base_url}/files",
        files={"file": ("red.png", RED, "image/png")},
        data={"purpose": "vision"},
        timeout=30,
    )
    assert made.status_code == 200, made.text
    by_file = {"type": "input_image", "file_id": made.json()["id"]}
    by_url, _ = usage(ask(server, user(image(data_url(RED)))))
    assert usage(ask(server, user(by_file)))[0] == by_url
    missing = ask(server, user({"type": "input_image", "file_id": "file-nothere"}))
    assert missing.status_code == 404
    assert missing.json()["error"]["param"] == "input[0].content[1].file_id"


def test_a_chained_turn_reuses_the_image_and_another_image_does_not(server: Server) -> None:
    first = ask(server, user(image(data_url(RED))), store=True)
    first_input, _ = usage(first)
    chained = ask(server, "And the colors?", previous_response_id=first.json()["id"])
    _, reused = usage(chained)
    assert reused >= first_input - 1  # the whole first prompt, the image in it
    again, _ = usage(ask(server, user(image(data_url(RED)))))
    other, shared = usage(ask(server, user(image(data_url(BLUE)))))
    # Same prompt, another image: cells reused up to the image only, never the image's.
    assert other == again and 0 < shared <= other - IMAGE_TOKENS - 1
    _, same = usage(ask(server, user(image(data_url(BLUE)))))
    assert same == other - 1  # the same image again: everything but the last token


def test_a_url_is_fetched_only_from_an_allowed_host(server: Server, images: Images) -> None:
    allowed, _ = usage(ask(server, user(image(f"{images.url}/allowed/red.png"))))
    assert images.hits.get("/allowed/red.png") == 1
    assert allowed == usage(ask(server, user(image(data_url(RED)))))[0]
    for url in (f"{images.url}/secret.png", "http://images.example/red.png"):
        refused = ask(server, user(image(f"{images.url}/allowed/b.png"), image(url)))
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "image_url_not_allowed"
        assert error["param"] == "input[0].content[2].image_url"
    # Every URL is checked before any is fetched: the allowed one beside it was not either.
    assert "/secret.png" not in images.hits and "/allowed/b.png" not in images.hits


def test_a_model_without_a_projector_refuses_the_part(server: Server) -> None:
    refused = ask(server, user(image(data_url(RED))), model="blind")
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "input[0].content[1]"


def test_chat_completions_image_url(server: Server) -> None:
    def prompt_tokens(*parts: dict[str, Any]) -> int:
        content = [{"type": "text", "text": "Describe it."}, *parts]
        body = {"model": "eyes", "messages": [{"role": "user", "content": content}]}
        reply = httpx.post(
            f"{server.base_url}/chat/completions", json={**body, "max_tokens": 3}, timeout=TIMEOUT
        )
        assert reply.status_code == 200, reply.text
        count: int = reply.json()["usage"]["prompt_tokens"]
        return count

    with_image = prompt_tokens({"type": "image_url", "image_url": {"url": data_url(RED)}})
    assert with_image - prompt_tokens() >= IMAGE_TOKENS
    refused = {"type": "image_url", "image_url": {"url": "http://images.example/a.png"}}
    content = [{"type": "text", "text": "Describe it."}, refused]
    body = {"model": "eyes", "messages": [{"role": "user", "content": content}]}
    reply = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=TIMEOUT)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["code"], error["param"]) == (
        "image_url_not_allowed",
        "messages[0].content[1].image_url",
    )


def test_messages_image_block(server: Server) -> None:
    def input_tokens(*blocks: dict[str, Any]) -> int:
        content = [{"type": "text", "text": "Describe it."}, *blocks]
        body = {
            "model": "eyes",
            "max_tokens": 3,
            "messages": [{"role": "user", "content": content}],
        }
        reply = httpx.post(f"{server.base_url}/messages", json=body, timeout=TIMEOUT)
        assert reply.status_code == 200, reply.text
        count: int = reply.json()["usage"]["input_tokens"]
        return count

    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(RED).decode()}
    with_image = input_tokens({"type": "image", "source": source})
    assert with_image - input_tokens() >= IMAGE_TOKENS


def test_the_projector_is_a_file_the_server_reads(tmp_path: Path) -> None:
    """The projector the tests write is a real mmproj GGUF (llama.cpp's keys)."""
    import gguf

    reader = gguf.GGUFReader(str(write_mmproj(tmp_path / "mmproj.gguf")))
    assert reader.fields["general.architecture"].contents() == "clip"
    assert reader.fields["clip.projector_type"].contents() == "mlp"


def test_a_computer_use_screenshot_is_seen(server: Server) -> None:
    """A screenshot replayed (by data URL or file id) reaches the model as an image."""
    tool = {"type": "computer_use_preview", "display_width": 64, "display_height": 64}
    call = {"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}}
    call |= {"pending_safety_checks": [], "status": "completed"}

    def body(screenshot: dict[str, Any]) -> dict[str, Any]:
        output = {"type": "computer_call_output", "call_id": "c1", "output": screenshot}
        tools = [{**tool, "environment": "browser"}]
        return {"model": "eyes", "tools": tools, "input": [user()[0], call, output]}

    def counted(screenshot: dict[str, Any]) -> int:
        reply = httpx.post(
            f"{server.base_url}/responses/input_tokens", json=body(screenshot), timeout=TIMEOUT
        )
        assert reply.status_code == 200, reply.text
        count: int = reply.json()["input_tokens"]
        return count

    made = httpx.post(
        f"{server.base_url}/files",
        files={"file": ("shot.png", BLUE, "image/png")},
        data={"purpose": "vision"},
        timeout=30,
    ).json()
    shot = {"type": "computer_screenshot", "image_url": data_url(BLUE)}
    assert counted({"type": "computer_screenshot", "file_id": made["id"]}) == counted(shot)
    decoded = server.log().count("an image of")
    generated = body(shot) | {"max_output_tokens": 1, "tool_choice": "none"}
    reply = httpx.post(f"{server.base_url}/responses", json=generated, timeout=TIMEOUT)
    assert reply.status_code == 200, reply.text
    assert server.log().count("an image of") == decoded + 1


@pytest.mark.parametrize("kind", ["not a GGUF", "another model's"])
def test_a_projector_that_cannot_load_fails_the_load_naming_it(tmp_path: Path, kind: str) -> None:
    from respond.engines.llamacpp import LlamaCppEngine, bundled_model_path

    path = tmp_path / "mmproj.gguf"
    if kind == "not a GGUF":
        path.write_text("not a projector")
    else:
        write_mmproj(path, text_width=64)  # the bundled model's embeddings are 576 wide
    engine = LlamaCppEngine(bundled_model_path(), alias="m", n_ctx=512, n_slots=1, mmproj_path=path)
    engine.load()
    assert not engine.ready
    assert (
        engine.load_error is not None
        and f"could not load the projector {path}" in engine.load_error
    )
