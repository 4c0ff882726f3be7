"""Stop sequences cut the text where one begins, however the deltas split it."""

from __future__ import annotations

from respond.engines import _base as d
from respond.responses._stops import StopSequences


def run(stops: list[str], deltas: list[d.Delta]) -> tuple[str, list[d.Delta], str | None]:
    cutter = StopSequences(stops)
    out = [kept for delta in deltas for kept in cutter.push(delta)]
    text = "".join(x.text for x in out if isinstance(x, d.TextDelta))
    return text, out, cutter.matched


def texts(*pieces: str) -> list[d.Delta]:
    return [*(d.TextDelta(p) for p in pieces), d.Usage(3, 2), d.Finish("length")]


def test_a_sequence_split_across_deltas_is_found_and_cut() -> None:
    text, out, matched = run(["END"], texts("one E", "N", "D two"))
    assert (text, matched) == ("one ", "END")
    assert out[-2:] == [d.Usage(3, 2), d.Finish("stop")]  # the stop, not the token limit


def test_the_earliest_of_several_sequences_wins() -> None:
    text, _, matched = run(["two", "one"], texts("zero one two"))
    assert (text, matched) == ("zero ", "one")


def test_held_text_that_does_not_complete_a_sequence_is_released() -> None:
    text, out, matched = run(["ENDING"], texts("a EN", "D b"))
    assert (text, matched) == ("a END b", None)
    assert out[-1] == d.Finish("length")


def test_held_text_is_released_before_a_tool_call() -> None:
    deltas: list[d.Delta] = [d.TextDelta("x E"), d.ToolCallStart("call_1", "f"), d.Finish("stop")]
    _, out, matched = run(["END"], deltas)
    assert matched is None
    assert out[:2] == [d.TextDelta("x "), d.TextDelta("E")]
    assert isinstance(out[2], d.ToolCallStart)


def test_everything_after_the_stop_but_usage_is_dropped() -> None:
    deltas: list[d.Delta] = [
        d.TextDelta("ok STOP more"),
        d.ToolCallStart("call_1", "f"),
        d.ToolCallArgumentsDelta("{}"),
        d.ToolCallEnd(),
        d.Usage(5, 4),
        d.Finish("stop"),
    ]
    text, out, matched = run(["STOP"], deltas)
    assert (text, matched) == ("ok ", "STOP")
    assert out == [d.TextDelta("ok "), d.Usage(5, 4), d.Finish("stop")]


def test_no_sequences_pass_deltas_through_untouched() -> None:
    deltas = texts("a", "b")
    assert run([], deltas)[1] == deltas
