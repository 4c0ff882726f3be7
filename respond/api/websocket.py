"""GET /v1/responses upgraded to a WebSocket (Open Responses `x-openresponses-websocket`).

The client sends `response.create` frames; each is prepared and run by the same
`Responses` service as POST /v1/responses, and its events go out as text frames, exactly
the JSON that SSE would carry. One response is in flight per socket: a frame that arrives
while one runs is answered with an error event and otherwise ignored.

The connection remembers the context (input + output) of the responses it created, so
previous_response_id chains on the socket also for `store: false` responses, which are
kept nowhere else. A failed turn clears that memory (stale state must not be reused);
continuing a forgotten `store: false` response then answers previous_response_not_found,
as it does on a new connection, where the store has never heard of it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass

import anyio
from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from starlette.websockets import WebSocketDisconnect

from respond.api._common import KeyRing
from respond.protocol import events as ev
from respond.protocol.errors import APIError
from respond.protocol.requests import InputItem
from respond.protocol.resource import ResponseResource
from respond.protocol.websocket import WebSocketErrorEvent, parse_frame
from respond.responses.run import PreparedRun, Responses

__all__ = ["router"]

log = logging.getLogger("respond.websocket")

router = APIRouter()

# How many responses a connection remembers for chaining. Agents continue from the latest
# one; a few more allow forks without letting a long-lived socket grow without bound.
REMEMBERED = 16
FORGOTTEN = 1024

_ITEM: TypeAdapter[InputItem] = TypeAdapter(InputItem)


@router.websocket("/v1/responses")
async def responses_socket(socket: WebSocket) -> None:
    keys: KeyRing = socket.app.state.keys
    try:
        tenant = keys.tenant(socket.headers.get("authorization"))
    except APIError as exc:
        await _deny(socket, exc)
        return
    await socket.accept()
    await Connection(socket, socket.app.state.responses, tenant).serve()


async def _deny(socket: WebSocket, exc: APIError) -> None:
    """Refuse the handshake with the HTTP error, where the server can send one."""
    if "websocket.http.response" in socket.scope.get("extensions", {}):
        await socket.send_denial_response(JSONResponse(exc.body(), status_code=exc.status))
    else:
        await socket.close(code=1008, reason=exc.message[:120])


@dataclass
class _Kept:
    context: list[InputItem]
    stored: bool


class Connection:
    """One client socket: reads frames, runs one response at a time, remembers context."""

    def __init__(self, socket: WebSocket, service: Responses, tenant: str | None) -> None:
        self.socket = socket
        self.service = service
        self.tenant = tenant
        self._turn_running: object | None = None  # the token of the turn in flight
        self._send_lock = anyio.Lock()
        # response id -> its whole context (input items then output items), oldest first.
        self._memory: OrderedDict[str, _Kept] = OrderedDict()
        # ids of store:false responses this connection created and no longer remembers.
        self._forgotten: OrderedDict[str, None] = OrderedDict()

    async def serve(self) -> None:
        async with anyio.create_task_group() as group:
            while True:
                message = await self.socket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                if self._turn_running is not None:
                    await self._send_error(
                        APIError(
                            409,
                            "A response is already in progress on this connection; wait for "
                            "its terminal event, or open another connection.",
                            code="response_already_in_progress",
                        )
                    )
                    continue
                token = self._turn_running = object()
                group.start_soon(self._turn, raw, token)
            # The client left: stop the run in flight (it ends cancelled and is recorded).
            group.cancel_scope.cancel()

    async def _turn(self, raw: str | bytes, token: object) -> None:
        try:
            await self._run_turn(raw, token)
        except APIError as exc:
            log.info("WS /v1/responses error %d %s", exc.status, exc.code or exc.type)
            self._forget_all()
            await self._send_error(exc)
        except (WebSocketDisconnect, OSError):
            pass  # the reader sees the disconnect and ends the connection
        except Exception as exc:
            log.exception("websocket turn failed")
            self._forget_all()
            await self._send_error(APIError(500, f"The server had an error: {exc}"))
        finally:
            self._release(token)

    def _release(self, token: object) -> None:
        """The connection is free for the next response.create (once per turn)."""
        if self._turn_running is token:
            self._turn_running = None

    async def _run_turn(self, raw: str | bytes, token: object) -> None:
        frame = parse_frame(raw, self.service.limits)
        body = frame.body
        history = self._history(body.previous_response_id)
        run = await self.service.prepare(body, tenant=self.tenant, remembered=history)
        run.generate = frame.generate
        async with aclosing(self.service.events(run)) as events:
            async for event in events:
                if isinstance(event, ev.TERMINAL_EVENTS):
                    # The run is stored by now (it records before its terminal event): take
                    # note and free the connection first, so a response.create sent the
                    # moment the client sees this event runs instead of getting a 409.
                    self._ended(run, event.response)
                    self._release(token)
                await self._send(event.model_dump_json())

    def _ended(self, run: PreparedRun, final: ResponseResource) -> None:
        usage = final.usage
        log.info(
            "WS /v1/responses %s %s%s",
            final.id,
            final.status,
            f" tokens={usage.input_tokens}+{usage.output_tokens}" if usage else "",
        )
        if final.status == "failed":
            self._forget_all()
            return
        self._remember(final, run.context)

    # ------------------------------------------------------------ memory

    def _history(self, previous: str | None) -> list[InputItem] | None:
        """The remembered context for previous_response_id, or None to let the store resolve it."""
        if previous is None:
            return None
        kept = self._memory.get(previous)
        if kept is not None:
            self._memory.move_to_end(previous)
            return kept.context
        if previous in self._forgotten:
            raise APIError(
                404,
                f"Previous response with id '{previous}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return None

    def _remember(self, response: ResponseResource, context: Sequence[InputItem]) -> None:
        try:
            output = [
                _ITEM.validate_python(item.model_dump(mode="json", exclude_none=True))
                for item in response.output
            ]
        except ValidationError:
            # An output item respond cannot take back as input: better to say "not found"
            # when it is continued than to continue from a context that lacks it.
            log.warning("response %s has output that cannot be replayed; not kept", response.id)
            self._drop(response.id, _Kept([], stored=response.store))
            return
        self._memory[response.id] = _Kept([*context, *output], stored=response.store)
        while len(self._memory) > REMEMBERED:
            self._drop(*self._memory.popitem(last=False))

    def _forget_all(self) -> None:
        while self._memory:
            self._drop(*self._memory.popitem(last=False))

    def _drop(self, response_id: str, kept: _Kept) -> None:
        # A stored response is still found through the store; a store:false one is gone.
        if not kept.stored:
            self._forgotten[response_id] = None
            while len(self._forgotten) > FORGOTTEN:
                self._forgotten.popitem(last=False)

    # ------------------------------------------------------------ sending

    async def _send(self, text: str) -> None:
        async with self._send_lock:
            await self.socket.send_text(text)

    async def _send_error(self, exc: APIError) -> None:
        # If the client is gone, nobody is listening for the error any more.
        with suppress(WebSocketDisconnect, OSError, RuntimeError):
            await self._send(WebSocketErrorEvent.of(exc).model_dump_json())
