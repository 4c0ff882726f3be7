"""A FAKE of the Hugging Face hub: the two endpoints huggingface_hub calls to fetch a file.

huggingface.co cannot be reached from the test machine, so this small HTTP server answers as
the hub does, for one model repo, with `HF_ENDPOINT` pointed at it:

- `GET /api/models/OWNER/NAME`: the model info, its files as `siblings`;
- `HEAD|GET /OWNER/NAME/resolve/REVISION/FILE`: the file, with the headers huggingface_hub
  reads (`X-Repo-Commit`, `ETag`, `X-Linked-Etag` = the sha256 of an LFS file, `X-Linked-Size`,
  `Content-Length`) and `Range: bytes=N-` answered 206.

It serves each file from disk, and can misbehave the way networks and mirrors do: `cut` drops
the connection after N bytes of the next download (once), `corrupt` sends other bytes than the
advertised sha256's, `down` answers every request 503; with a `token` the repo is private, as
the hub answers a request without it (401). Every request is kept in `requests` for
the tests to read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_CHUNK = 1 << 20


@functools.cache
def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Request:
    method: str
    path: str
    range: str | None  # the Range header, as sent


@dataclass
class FakeHub:
    """One repo, `repo`, holding `files` (name in the repo -> file on disk)."""

    repo: str
    files: Mapping[str, Path]
    cut: int | None = None  # drop the next download's connection after this many bytes
    corrupt: set[str] = field(default_factory=set)  # files sent with wrong bytes
    down: bool = False  # every request answered 503, as a hub having an outage
    token: str | None = None  # a private repo: requests need `Authorization: Bearer TOKEN`
    requests: list[Request] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake hub first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def downloads(self, name: str) -> list[Request]:
        """The GETs of one file: its downloads, resumed ones with their Range."""
        return [r for r in self.requests if r.method == "GET" and r.path.endswith(f"/{name}")]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return  # the tests read `requests`, not a log

    def do_GET(self) -> None:
        self.answer(body=True)

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def answer(self, *, body: bool) -> None:
        fake = self.fake
        fake.requests.append(Request(self.command, self.path, self.headers.get("Range")))
        path = self.path.split("?", 1)[0]
        if fake.down:
            self.send_json(503, {"error": "Service Unavailable"})
        elif fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
            error = {"error": "Repository Not Found"}
            self.send_json(401, error, {"X-Error-Code": "RepoNotFound"})
        elif path in (f"/api/models/{fake.repo}", f"/api/models/{fake.repo}/revision/main"):
            self.model_info()
        elif match := re.fullmatch(rf"/{re.escape(fake.repo)}/resolve/[^/]+/(.+)", path):
            self.file(match[1], body=body)
        else:
            self.send_json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})

    def model_info(self) -> None:
        fake = self.fake
        siblings = [{"rfilename": name} for name in fake.files]
        info = {"id": fake.repo, "modelId": fake.repo, "sha": COMMIT, "siblings": siblings}
        self.send_json(200, info)

    def file(self, name: str, *, body: bool) -> None:
        source = self.fake.files.get(name)
        if source is None:
            headers = {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}
            self.send_json(404, {"error": f"{name} not found"}, headers)
            return
        size = source.stat().st_size
        start = _range_start(self.headers.get("Range"))
        self.send_response(206 if start else 200)
        etag = f'"{sha256_of(source)}"'
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", etag)
        self.send_header("X-Linked-Etag", etag)
        self.send_header("X-Linked-Size", str(size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(size - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        if body:
            self.send_file(name, source, start)

    def send_file(self, name: str, source: Path, start: int) -> None:
        cut, self.fake.cut = self.fake.cut, None  # once
        with source.open("rb") as stream:
            stream.seek(start)
            sent = start
            while chunk := stream.read(_CHUNK):
                if name in self.fake.corrupt:
                    chunk = bytes(byte ^ 0xFF for byte in chunk[:64]) + chunk[64:]
                if cut is not None and sent + len(chunk) > cut:
                    self.wfile.write(chunk[: cut - sent])
                    self.wfile.flush()
                    self.close_connection = True
                    # Mid-body: the client has fewer bytes than Content-Length said.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(chunk)
                sent += len(chunk)

    def send_json(
        self, status: int, payload: object, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def _range_start(header: str | None) -> int:
    """`bytes=N-` -> N (the only form huggingface_hub sends); 0 without one."""
    match = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(match[1]) if match else 0
