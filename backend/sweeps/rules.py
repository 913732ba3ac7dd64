"""Early-stopping rules: whether a trial goes on past a rung, judged against the others'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from backend.sweeps.schemas import EarlyStopping


@dataclass(frozen=True)
class Verdict:
    keep: bool
    threshold: float | None  # None: too few trials at the rung to judge yet
    why: str


def judge(
    rule: EarlyStopping, *, mode: Literal["min", "max"], value: float, others: list[float]
) -> Verdict:
    """The verdict on a trial's `value` at a rung, given the other trials' values there."""
    if not np.isfinite(value):
        return Verdict(False, None, "its value is not a finite number")
    others = [v for v in others if np.isfinite(v)]
    if len(others) + 1 < rule.min_trials:
        return Verdict(True, None, f"{len(others) + 1} trials at this rung, too few to judge")
    if rule.rule == "asha":
        recorded = [*others, value]
        keep_fraction = 1.0 / float(rule.reduction_factor)
        # the cutoff value of the best 1/eta of the recorded values, itself included
        quantile = keep_fraction if mode == "min" else 1.0 - keep_fraction
        threshold = float(np.quantile(recorded, quantile))
        how = f"ASHA: best 1/{rule.reduction_factor:g} of {len(recorded)} trials at this rung"
    else:
        threshold = float(np.median(others))
        how = f"median of {len(others)} other trials at this rung"
    keep = value <= threshold if mode == "min" else value >= threshold
    return Verdict(keep, threshold, how)


def value_at(steps: list[int], values: list[float], rung: int) -> float | None:
    """A curve's value at a rung: its last point at or before the rung, once it has passed it."""
    if not steps or steps[-1] < rung:
        return None
    index = int(np.searchsorted(steps, rung, side="right")) - 1
    return values[index] if index >= 0 else None
