"""HTTP behaviour a real model can't show on demand, driven by the FAKE ScriptedEngine."""

from __future__ import annotations

import threading

import httpx

from respond.app import create_app
from respond.engines import _base as d
from respond.testing import ScriptedEngine
from tests.support.inproc import serving
from tests.support.schema import validate_event, validate_response
from tests.support.sse import read_events


def test_health_is_503_while_the_model_loads_then_ok() -> None:
    gate = threading.Event()
    engine = ScriptedEngine(gate=gate)
    with serving(create_app({engine.info.id: engine})) as url:
        loading = httpx.get(f"{url}/health")
        assert loading.status_code == 503
        assert loading.json()["error"]["code"] == "model_loading"
        busy = httpx.post(f"{url}/v1/responses", json={"input": "x"})
        assert busy.status_code == 503
        assert busy.json()["error"]["code"] == "model_loading"
        gate.set()
        for _ in range(100):
            if httpx.get(f"{url}/health").status_code == 200:
                break
            threading.Event().wait(0.05)
        assert httpx.get(f"{url}/health").json() == {"status": "ok"}


def test_error_mid_stream_closes_items_then_one_failed_event() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("partial "), d.EngineError("the model crashed", code="server_error"))
    with (
        serving(create_app({engine.info.id: engine})) as url,
        httpx.stream("POST", f"{url}/v1/responses", json={"input": "x", "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    for event in events:
        validate_event(event)
    types = [e["type"] for e in events]
    assert types[-2:] == ["response.output_item.done", "response.failed"]
    assert events[-2]["item"]["status"] == "incomplete"
    failed = events[-1]["response"]
    validate_response(failed)
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "the model crashed"}


def test_error_without_stream_is_an_error_envelope() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.EngineError("upstream said no", code="upstream_error", status=502))
    with serving(create_app({engine.info.id: engine})) as url:
        reply = httpx.post(f"{url}/v1/responses", json={"input": "x"})
    assert reply.status_code == 502
    assert reply.json()["error"]["message"] == "upstream said no"


def test_unexpected_bug_still_ends_the_stream() -> None:
    engine = ScriptedEngine()
    engine.enqueue(d.TextDelta("a"), RuntimeError("a bug"))
    with (
        serving(create_app({engine.info.id: engine})) as url,
        httpx.stream("POST", f"{url}/v1/responses", json={"input": "x", "stream": True}) as reply,
    ):
        events = list(read_events(reply))
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"
