"""The decode step's room: sized to what the hardware reads in STEP_SECONDS (_pace.py)."""

from __future__ import annotations

from respond.engines.llamacpp._pace import STEP_SECONDS, Pace, beside_a_long_prompt


def run_steps(pace: Pace, fixed: float, per_token: float, steps: int) -> float:
    """Steps of a machine where a step of n tokens takes fixed + n * per_token seconds, each
    as full as the room allows (a long prompt being read); the last step's seconds."""
    seconds = 0.0
    for _ in range(steps):
        room = pace.room()
        seconds = fixed + room * per_token
        pace.took(room, seconds, full=True)
    return seconds


def test_before_any_step_the_room_is_small_and_within_the_batch() -> None:
    assert Pace(512).room() == 64
    assert Pace(32).room() == 32


def test_on_a_fast_device_the_room_is_the_whole_batch() -> None:
    pace = Pace(512)
    run_steps(pace, fixed=0.002, per_token=0.00001, steps=3)
    assert pace.room() == 512


def test_on_a_slow_cpu_a_full_step_settles_at_the_target() -> None:
    """Two CPU cores deep in a long prompt: ~2 ms a token and 15 ms a pass over the weights.
    512 tokens would take a second; the pace settles where a step takes STEP_SECONDS."""
    pace = Pace(512)
    last = run_steps(pace, fixed=0.015, per_token=0.002, steps=12)
    assert abs(last - STEP_SECONDS) < 0.1 * STEP_SECONDS
    assert 40 <= pace.room() <= 80


def test_the_room_follows_the_cost_as_the_prompt_grows_deeper() -> None:
    pace = Pace(512)
    run_steps(pace, fixed=0.015, per_token=0.0005, steps=12)
    shallow = pace.room()
    run_steps(pace, fixed=0.015, per_token=0.002, steps=12)
    assert pace.room() < shallow / 3


def test_steps_the_room_did_not_limit_are_not_counted() -> None:
    """Four streams decoding one token each in 40 ms say nothing of a full step's time."""
    pace = Pace(512)
    run_steps(pace, fixed=0.002, per_token=0.00001, steps=3)
    pace.took(4, 0.04, full=False)
    assert pace.room() == 512


def test_however_slow_the_machine_a_step_is_worth_its_fixed_cost() -> None:
    """One thread on a loaded machine: a pass over the graph costs more than the target."""
    pace = Pace(512)
    run_steps(pace, fixed=0.2, per_token=0.01, steps=5)
    assert pace.room() == 64


def test_only_a_prompt_longer_than_a_batch_paces_the_step() -> None:
    assert beside_a_long_prompt([1, 1, 2000], 512)  # streams beside a long prompt's chunk
    assert not beside_a_long_prompt([1, 1, 180, 180, 300], 512)  # agents' turns: whole batches
    assert not beside_a_long_prompt([512, 1], 512)
