"""Turning a search space into trials: every grid point, or seeded random draws."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from typing import Any

from backend.sweeps.schemas import MAX_GRID_POINTS, MAX_TRIALS, Choice, Method, Range

Setting = dict[str, Any]  # a spec path ("hyperparameters.lr") → its value in one trial


def expand(
    space: Mapping[str, Choice | Range], *, method: Method, trials: int | None, seed: int
) -> list[Setting]:
    """The trials of a search, in order: the grid's product (paths in the order given), or
    `trials` random draws (ranges sampled uniformly, or log-uniformly; choices uniformly).

    A grid's size is counted from the parameters before anything is built (ValueError
    above MAX_GRID_POINTS, or above MAX_TRIALS when `trials` does not cap it), and only
    the trials taken are ever made: memory follows the trials, never the grid.
    """
    if method == "grid":
        size = grid_size(space)
        if size > MAX_GRID_POINTS:
            raise ValueError(
                f"the grid has {size:,} points ({_product(space)}); the cap is"
                f" {MAX_GRID_POINTS:,} points: narrow it, or use method random"
            )
        if trials is None and size > MAX_TRIALS:
            raise ValueError(
                f"the grid has {size:,} points, more than the {MAX_TRIALS} trials a sweep may"
                " have: set trials to take the first ones, or narrow it"
            )
        axes = [_grid_values(path, dim) for path, dim in space.items()]
        points = itertools.islice(itertools.product(*axes), trials)
        return [dict(zip(space, point, strict=True)) for point in points]
    rng = random.Random(seed)
    count = trials if trials is not None else 10
    return [{path: _draw(rng, dim) for path, dim in space.items()} for _ in range(count)]


def grid_size(space: Mapping[str, Choice | Range]) -> int:
    """How many trials a grid over `space` has (before any `trials` cap), counted from
    the parameters without building a point."""
    return math.prod(_count(path, dim) for path, dim in space.items())


def apply(spec: dict[str, Any], setting: Setting) -> dict[str, Any]:
    """The changes one trial makes to the base spec, as a nested partial spec."""
    changes: dict[str, Any] = {}
    for path, value in setting.items():
        *parents, leaf = path.split(".")
        target = changes
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return changes


def _count(path: str, dim: Choice | Range) -> int:
    """How many values a parameter has in a grid."""
    if isinstance(dim, Choice):
        return len(dim.values)
    if dim.steps is None:
        raise ValueError(f"{path}: a range in a grid needs steps (how many values)")
    return dim.steps


def _product(space: Mapping[str, Choice | Range]) -> str:
    """The grid's size as its factors: '32 × 32 × 32'."""
    return " × ".join(str(_count(path, dim)) for path, dim in space.items())


def _grid_values(path: str, dim: Choice | Range) -> list[Any]:
    if isinstance(dim, Choice):
        return list(dim.values)
    if _count(path, dim) == 1:
        return [dim.min]
    steps = _count(path, dim)
    if dim.log:
        low, high = math.log(dim.min), math.log(dim.max)
        values = [math.exp(low + (high - low) * i / (steps - 1)) for i in range(steps)]
    else:
        values = [dim.min + (dim.max - dim.min) * i / (steps - 1) for i in range(steps)]
    return [_rounded(v, dim.integer) for v in values]


def _draw(rng: random.Random, dim: Choice | Range) -> Any:
    if isinstance(dim, Choice):
        return rng.choice(dim.values)
    if dim.log:
        value = math.exp(rng.uniform(math.log(dim.min), math.log(dim.max)))
    else:
        value = rng.uniform(dim.min, dim.max)
    return _rounded(value, dim.integer)


def _rounded(value: float, integer: bool) -> float | int:
    return round(value) if integer else float(f"{value:.6g}")
