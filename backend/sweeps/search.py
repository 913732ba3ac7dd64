"""Turning a search space into trials: every grid point, or seeded random draws."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from typing import Any

from backend.sweeps.schemas import Choice, Method, Range

Setting = dict[str, Any]  # a spec path ("hyperparameters.lr") → its value in one trial


def expand(
    space: Mapping[str, Choice | Range], *, method: Method, trials: int | None, seed: int
) -> list[Setting]:
    """The trials of a search, in order: the grid's product (paths in the order given), or
    `trials` random draws (ranges sampled uniformly, or log-uniformly; choices uniformly)."""
    if method == "grid":
        axes = [_grid_values(path, dim) for path, dim in space.items()]
        grid = [dict(zip(space, point, strict=True)) for point in itertools.product(*axes)]
        return grid[:trials] if trials is not None else grid
    rng = random.Random(seed)
    count = trials if trials is not None else 10
    return [{path: _draw(rng, dim) for path, dim in space.items()} for _ in range(count)]


def grid_size(space: Mapping[str, Choice | Range]) -> int:
    """How many trials a grid over `space` has (before any `trials` cap)."""
    return math.prod(len(_grid_values(path, dim)) for path, dim in space.items())


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


def _grid_values(path: str, dim: Choice | Range) -> list[Any]:
    if isinstance(dim, Choice):
        return list(dim.values)
    if dim.steps is None:
        raise ValueError(f"{path}: a range in a grid needs steps (how many values)")
    if dim.steps == 1:
        return [dim.min]
    if dim.log:
        low, high = math.log(dim.min), math.log(dim.max)
        values = [math.exp(low + (high - low) * i / (dim.steps - 1)) for i in range(dim.steps)]
    else:
        values = [dim.min + (dim.max - dim.min) * i / (dim.steps - 1) for i in range(dim.steps)]
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
