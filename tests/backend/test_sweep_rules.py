"""Sweep search expansion (grid, random) and the early-stopping rules (ASHA, median)."""

from __future__ import annotations

import math
import time
import tracemalloc

import pytest

from backend.sweeps.rules import judge, value_at
from backend.sweeps.schemas import MAX_GRID_POINTS, MAX_TRIALS, Choice, EarlyStopping, Range
from backend.sweeps.search import apply, expand, grid_size

LR = "hyperparameters.lr"
SEED = "hyperparameters.seed"


def test_grid_is_the_product_in_the_order_given() -> None:
    space = {LR: Choice(values=[0.1, 0.01]), SEED: Choice(values=[1, 2, 3])}
    trials = expand(space, method="grid", trials=None, seed=0)
    assert trials == [
        {LR: 0.1, SEED: 1},
        {LR: 0.1, SEED: 2},
        {LR: 0.1, SEED: 3},
        {LR: 0.01, SEED: 1},
        {LR: 0.01, SEED: 2},
        {LR: 0.01, SEED: 3},
    ]
    assert grid_size(space) == 6
    assert len(expand(space, method="grid", trials=4, seed=0)) == 4  # a cap


def test_grid_ranges_are_evenly_spaced_linear_or_log() -> None:
    linear = expand({LR: Range(min=0, max=1, steps=5)}, method="grid", trials=None, seed=0)
    assert [t[LR] for t in linear] == [0.0, 0.25, 0.5, 0.75, 1.0]
    log = expand(
        {LR: Range(min=1e-4, max=1e-1, steps=4, log=True)}, method="grid", trials=None, seed=0
    )
    assert [t[LR] for t in log] == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1])
    ints = expand(
        {"hyperparameters.hidden": Range(min=8, max=64, steps=3, integer=True)},
        method="grid",
        trials=None,
        seed=0,
    )
    assert [t["hyperparameters.hidden"] for t in ints] == [8, 36, 64]


def test_a_huge_grid_is_refused_from_its_counts_without_building_a_point() -> None:
    """6 parameters of 32 values: 2^30 points, refused by counting (was: built, memory ran out)."""
    space = {f"hyperparameters.p{i}": Choice(values=list(range(32))) for i in range(6)}
    assert grid_size(space) == 2**30
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        expand(space, method="grid", trials=4, seed=0)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(refused.value) == (
        "the grid has 1,073,741,824 points (32 × 32 × 32 × 32 × 32 × 32); the cap is"
        f" {MAX_GRID_POINTS:,} points: narrow it, or use method random"
    )
    assert elapsed < 0.05 and peak < 1 << 20


def test_a_grid_is_taken_lazily_up_to_trials_and_needs_trials_above_the_sweep_cap() -> None:
    space = {f"hyperparameters.p{i}": Choice(values=list(range(16))) for i in range(3)}
    assert grid_size(space) == 4096 == MAX_GRID_POINTS  # at the cap: allowed
    tracemalloc.start()
    first = expand(space, method="grid", trials=3, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [list(t.values()) for t in first] == [[0, 0, 0], [0, 0, 1], [0, 0, 2]]
    assert peak < 256 << 10  # three points made, not 4096
    with pytest.raises(ValueError, match=f"4,096 points, more than the {MAX_TRIALS} trials"):
        expand(space, method="grid", trials=None, seed=0)
    random_draws = expand(space, method="random", trials=MAX_TRIALS, seed=1)
    assert len(random_draws) == MAX_TRIALS


def test_a_grid_range_without_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="needs steps"):
        expand({LR: Range(min=0, max=1)}, method="grid", trials=None, seed=0)


def test_random_draws_are_seeded_within_bounds_and_log_uniform() -> None:
    space: dict[str, Choice | Range] = {
        LR: Range(min=1e-5, max=1e-1, log=True),
        SEED: Choice(values=[1, 2, 3]),
    }
    first = expand(space, method="random", trials=200, seed=7)
    assert first == expand(space, method="random", trials=200, seed=7)
    assert first != expand(space, method="random", trials=200, seed=8)
    lrs = [t[LR] for t in first]
    assert all(1e-5 <= v <= 1e-1 for v in lrs)
    decades = [math.floor(math.log10(v)) for v in lrs]  # log-uniform: every decade is used
    assert {d: decades.count(d) > 20 for d in range(-5, -1)} == dict.fromkeys(range(-5, -1), True)
    assert {t[SEED] for t in first} == {1, 2, 3}


def test_a_setting_becomes_a_nested_partial_spec() -> None:
    assert apply({}, {LR: 0.1, "parallelism.devices": 2}) == {
        "hyperparameters": {"lr": 0.1},
        "parallelism": {"devices": 2},
    }


def asha(eta: float = 3, min_trials: int = 1) -> EarlyStopping:
    return EarlyStopping(rule="asha", rungs=[10], reduction_factor=eta, min_trials=min_trials)


def test_asha_keeps_the_best_third_at_a_rung() -> None:
    others = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert judge(asha(), mode="min", value=0.5, others=others).keep
    worst = judge(asha(), mode="min", value=6.0, others=others)
    assert not worst.keep
    assert worst.threshold == pytest.approx(2.6666, rel=1e-3)  # the 1/3 quantile of all six
    assert "best 1/3 of 6 trials" in worst.why
    assert judge(asha(), mode="max", value=6.0, others=others).keep  # higher is better
    assert not judge(asha(), mode="max", value=0.5, others=others).keep


def test_asha_first_trial_at_a_rung_goes_on() -> None:
    verdict = judge(asha(), mode="min", value=9.0, others=[])
    assert verdict.keep and verdict.threshold == 9.0


def test_too_few_trials_at_a_rung_is_no_verdict() -> None:
    verdict = judge(asha(min_trials=3), mode="min", value=9.0, others=[1.0])
    assert verdict.keep and verdict.threshold is None and "too few" in verdict.why


def test_median_rule_compares_with_the_others_median() -> None:
    rule = EarlyStopping(rule="median", rungs=[5], min_trials=2)
    assert judge(rule, mode="min", value=2.0, others=[1.0, 3.0]).keep  # equal: goes on
    stopped = judge(rule, mode="min", value=2.1, others=[1.0, 3.0])
    assert not stopped.keep and stopped.threshold == 2.0
    assert "median of 2 other trials" in stopped.why
    fewer = EarlyStopping(rule="median", rungs=[5], min_trials=3)  # itself included
    assert judge(fewer, mode="min", value=100.0, others=[1.0]).keep


def test_a_diverged_trial_is_stopped_whatever_the_others() -> None:
    assert not judge(asha(), mode="min", value=float("nan"), others=[]).keep
    assert not judge(asha(), mode="min", value=float("inf"), others=[1.0]).keep


def test_value_at_a_rung_is_the_last_point_at_or_before_it_once_passed() -> None:
    steps, values = [1, 5, 9, 12], [4.0, 3.0, 2.0, 1.0]
    assert value_at(steps, values, 10) == 2.0
    assert value_at(steps, values, 12) == 1.0
    assert value_at(steps, values, 13) is None  # not reached yet
    assert value_at([], [], 1) is None


def test_rungs_must_increase() -> None:
    with pytest.raises(ValueError, match="increasing"):
        EarlyStopping(rule="asha", rungs=[10, 5])
