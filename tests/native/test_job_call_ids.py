"""Each call of a turn has its own id, also where the model writes the ids itself."""

from __future__ import annotations

from respond.engines._base import Delta, ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart
from respond.engines.llamacpp._job import _unique_call_ids


def test_an_id_the_model_writes_twice_is_replaced_the_second_time() -> None:
    """Solar Open's bundled-model calls both came as `YourQuery`: two outputs with one
    call_id, which no client can match to their calls."""
    out: list[Delta | BaseException | None] = []
    fresh = iter(["call_fresh1", "call_fresh2"])
    emit = _unique_call_ids(out.append, lambda: next(fresh))
    deltas: list[Delta | None] = [
        ToolCallStart("YourQuery", "get_weather"), ToolCallArgumentsDelta("{}"), ToolCallEnd(),
        ToolCallStart("YourQuery", "get_weather"), ToolCallArgumentsDelta("{}"), ToolCallEnd(),
        ToolCallStart("Other0001", "get_time"), ToolCallEnd(), None,
    ]  # fmt: skip
    for delta in deltas:
        emit(delta)
    starts = [d for d in out if isinstance(d, ToolCallStart)]
    assert [s.call_id for s in starts] == ["YourQuery", "call_fresh1", "Other0001"]
    assert [s.name for s in starts] == ["get_weather", "get_weather", "get_time"]
    assert len(out) == 9 and out[-1] is None
