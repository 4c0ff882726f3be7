"""A FAKE upstream: a real HTTP server that plays scripted Chat Completions / Responses streams.

It exists for what a tiny real model cannot produce on demand (parallel tool calls with
interleaved argument fragments, exact repeats of a call, reasoning fields and summaries,
a 500, a cut connection, a stall).
The request's `model` picks the script; `echo` answers with the request body it received,
so tests can check the translation respond sent. Run as a process:

    python -m tests.support.fake_upstream --port 9001 --name a

GET /stats reports how many requests it served and how many streams the client abandoned.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCENARIOS = [
    "echo",
    "tools",
    "repeats",
    "summary",
    "reasoning",
    "think",
    "length",
    "error500",
    "cut",
    "stall",
    "slow",
    "schema-picky",
    "bench",
    "nostream",
]

STATS = {"requests": 0, "aborted": 0}
LOCK = threading.Lock()
NAME = "fake"


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


def tool(index: int, *, call_id: str = "", name: str = "", arguments: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        entry["id"] = call_id
        entry["type"] = "function"
    if name:
        entry["function"]["name"] = name
    return entry


def chat_script(model: str, body: dict[str, Any], auth: str = "") -> list[dict[str, Any]]:
    if model == "tools":
        return [
            chunk({"role": "assistant"}),
            chunk({"tool_calls": [tool(0, call_id="call_a", name="get_weather")]}),
            chunk({"tool_calls": [tool(1, call_id="call_b", name="get_time")]}),
            chunk({"tool_calls": [tool(0, arguments='{"city": ')]}),
            chunk({"tool_calls": [tool(1, arguments='{"tz": ')]}),
            chunk({"tool_calls": [tool(0, arguments='"Paris"}')]}),
            chunk({"tool_calls": [tool(1, arguments='"UTC"}')]}),
            chunk({}, "tool_calls"),
            usage(20, 12),
        ]
    if model == "repeats":  # a call, the same call again (other whitespace), another call
        return [
            chunk({"role": "assistant"}),
            chunk({"tool_calls": [tool(0, call_id="call_a", name="get_weather")]}),
            chunk({"tool_calls": [tool(0, arguments='{"city": "Paris"}')]}),
            chunk({"tool_calls": [tool(1, call_id="call_b", name="get_weather")]}),
            chunk({"tool_calls": [tool(1, arguments='{"city":"Paris"}')]}),
            chunk({"tool_calls": [tool(2, call_id="call_c", name="get_weather")]}),
            chunk({"tool_calls": [tool(2, arguments='{"city": "Rome"}')]}),
            chunk({}, "tool_calls"),
            usage(20, 30),
        ]
    if model == "reasoning":
        return [
            chunk({"role": "assistant", "reasoning_content": "Let me "}),
            chunk({"reasoning_content": "think."}),
            chunk({"content": "Answer"}),
            chunk({"content": "."}),
            chunk({}, "stop"),
            usage(30, 9, cached=16, reasoning=5),
        ]
    if model == "think":
        pieces = ["<thi", "nk>ponder", "ing</th", "ink>Done", "."]
        return [chunk({"content": p}) for p in pieces] + [chunk({}, "stop"), usage(5, 6)]
    if model == "length":
        return [chunk({"content": "abc"}), chunk({"content": "def"}), chunk({}, "length")]
    if model == "bench":  # a short answer in 16 chunks, as fast as possible (bench/)
        return [chunk({"content": f"tok{i} "}) for i in range(16)] + [
            chunk({}, "stop"),
            usage(12, 16),
        ]
    if model == "slow":
        return [chunk({"content": f"w{i} "}) for i in range(200)] + [chunk({}, "stop")]
    # echo and schema-picky: say what was received, in two fragments.
    text = json.dumps({"server": NAME, "request": body, "authorization": auth})
    half = len(text) // 2
    return [
        chunk({"role": "assistant", "content": text[:half]}),
        chunk({"content": text[half:]}),
        chunk({}, "stop"),
        usage(11, 7),
    ]


def completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A non-streamed chat.completion with the text of a script (for direct bench calls)."""
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    finish = next(
        (
            c["choices"][0]["finish_reason"]
            for c in chunks
            if c.get("choices") and c["choices"][0]["finish_reason"]
        ),
        "stop",
    )
    used = next((c["usage"] for c in chunks if "usage" in c), None)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
        "usage": used,
    }


def responses_script(model: str, body: dict[str, Any], auth: str = "") -> list[dict[str, Any]]:
    def ev(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, **fields}

    resp = {"id": "resp_up", "object": "response", "status": "in_progress", "output": []}
    head = [ev("response.created", response=resp), ev("response.in_progress", response=resp)]
    done_usage = {
        "input_tokens": 12,
        "output_tokens": 5,
        "total_tokens": 17,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    if model == "tools":
        item = {"type": "function_call", "id": "fc_up", "call_id": "call_1", "name": "get_weather"}
        return [
            *head,
            ev("response.output_item.added", output_index=0, item={**item, "arguments": ""}),
            ev("response.function_call_arguments.delta", item_id="fc_up", delta='{"city":'),
            ev("response.function_call_arguments.delta", item_id="fc_up", delta='"Oslo"}'),
            ev("response.output_item.done", item={**item, "arguments": '{"city":"Oslo"}'}),
            ev("response.completed", response={**resp, "status": "completed", "usage": done_usage}),
        ]
    if model == "repeats":
        out = [*head]
        for index, city in enumerate(["Paris", "Paris", "Rome"]):
            item = {"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}"}
            item["name"] = "get_weather"
            arguments = f'{{"city": "{city}"}}'
            out += [
                ev(
                    "response.output_item.added", output_index=index, item={**item, "arguments": ""}
                ),
                ev("response.function_call_arguments.delta", item_id=item["id"], delta=arguments),
                ev("response.output_item.done", item={**item, "arguments": arguments}),
            ]
        return [*out, ev("response.completed", response={**resp, "status": "completed"})]
    if model == "summary":
        return [
            *head,
            ev("response.reasoning_summary_text.delta", item_id="rs_up", delta="In short: "),
            ev("response.reasoning_summary_text.delta", item_id="rs_up", delta="yes."),
            ev("response.output_item.done", item={"type": "reasoning", "id": "rs_up"}),
            ev("response.output_text.delta", item_id="msg_up", delta="Yes."),
            ev("response.completed", response={**resp, "status": "completed"}),
        ]
    if model == "length":
        return [
            *head,
            ev("response.output_text.delta", item_id="msg_up", delta="cut sh"),
            ev(
                "response.incomplete",
                response={
                    **resp,
                    "status": "incomplete",
                    "incomplete_details": {"reason": "max_output_tokens"},
                },
            ),
        ]
    if model == "bench":
        deltas = [
            ev("response.output_text.delta", item_id="msg_up", delta=f"tok{i} ") for i in range(16)
        ]
        return [*head, *deltas, ev("response.completed", response={**resp, "usage": done_usage})]
    if model == "error500":  # a failed response, reported in-stream
        failed = {**resp, "status": "failed", "error": {"code": "x", "message": "model crashed"}}
        return [*head, ev("response.failed", response=failed)]
    text = json.dumps({"server": NAME, "request": body, "authorization": auth})
    return [
        *head,
        ev("response.reasoning.delta", item_id="rs_up", delta="hmm"),
        ev("response.output_item.done", item={"type": "reasoning", "id": "rs_up"}),
        ev("response.output_text.delta", item_id="msg_up", delta=text[:10]),
        ev("response.output_text.delta", item_id="msg_up", delta=text[10:]),
        ev("response.completed", response={**resp, "status": "completed", "usage": done_usage}),
    ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, *_: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            data = [{"id": name, "object": "model", "owned_by": "fake"} for name in SCENARIOS]
            self.reply(200, {"object": "list", "data": data})
        elif self.path == "/stats":
            with LOCK:
                self.reply(200, {"name": NAME, **STATS})
        else:
            self.reply(404, {"error": {"message": "no such path"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with LOCK:
            STATS["requests"] += 1
        model = str(body.get("model"))
        auth = self.headers.get("authorization", "")
        if model == "error500" and self.path.endswith("/chat/completions"):
            self.reply(500, {"error": {"message": "fake upstream exploded", "type": "x"}})
            return
        if model == "schema-picky":
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                # llama-cpp-python's server answers like this.
                message = "Input should be 'text' or 'json_object' (response_format.json_schema)"
                self.reply(500, {"error": {"message": message}})
                return
        streamed = body.get("stream") is True and model != "nostream"  # nostream ignores it
        if self.path.endswith("/chat/completions") and not streamed:
            self.reply(200, completion(chat_script(model, body, auth)))
        elif self.path.endswith("/chat/completions"):
            self.stream(model, chat_script(model, body, auth), done=True)
        elif self.path.endswith("/responses/input_tokens"):
            self.reply(200, {"object": "response.input_tokens", "input_tokens": 42})
        elif self.path.endswith("/responses"):
            self.stream(model, responses_script(model, body, auth), done=False)
        else:
            self.reply(404, {"error": {"message": "no such path"}})

    def reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, model: str, events: list[dict[str, Any]], *, done: bool) -> None:
        """SSE, chunked on a kept-alive connection like vLLM; `cut` closes mid-stream."""
        chunked = model != "cut"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            for index, event in enumerate(events):
                if model == "cut" and index == 2:
                    return  # the connection closes mid-stream: no finish, no [DONE]
                if model == "stall" and index == 1:
                    time.sleep(30)
                    self.close_connection = True
                    return
                name = f"event: {event['type']}\n" if "type" in event else ""
                self.write(f"{name}data: {json.dumps(event)}\n\n".encode(), chunked)
                if model == "slow":
                    time.sleep(0.05)
            if done:
                self.write(b"data: [DONE]\n\n", chunked)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            with LOCK:
                STATS["aborted"] += 1

    def write(self, data: bytes, chunked: bool) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 drops connections at concurrency 32


def main() -> None:
    global NAME
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="fake")
    args = parser.parse_args()
    NAME = args.name
    Server((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
