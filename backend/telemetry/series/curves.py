"""Turning raw series into chart curves: one value per step, attempts merged, LTTB downsampled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from tsdownsample import LTTBDownsampler

from backend.telemetry.series.cache import Raw

#: step; time: wall seconds since the job's first point; wall: the clock (unix seconds);
#: device_hours: what the job had used
XAxis = Literal["step", "time", "wall", "device_hours"]
#: which end of a metric is best: its minimum, its maximum, or neither (None)
Direction = Literal["min", "max"] | None
#: a metric whose name contains one of these is best when lowest (compare's "best")
LOWER_IS_BETTER = ("loss", "err", "perplex", "ppl", "time", "latency", "nan", "mem")
#: a metric whose name contains one of these has no best end: a large gradient norm or
#: learning rate is no better than a small one (checked before LOWER_IS_BETTER: loss_scale)
NEITHER = ("norm", "lr", "scale", "epoch", "momentum")
#: what the SDK's and a template's declared direction may say ("none": neither end)
DECLARED = {"min": "min", "max": "max", "none": None}


@dataclass(frozen=True)
class Curve:
    """Columns of one curve, ordered by its x axis."""

    step: np.ndarray
    time: np.ndarray
    value: np.ndarray

    def as_columns(self) -> dict[str, list[float] | list[int]]:
        return {
            "step": self.step.tolist(),
            "time": self.time.tolist(),
            "value": self.value.tolist(),
        }


EMPTY_CURVE = Curve(np.empty(0, np.int64), np.empty(0), np.empty(0))


def per_step(raw: Raw, rank: int | None = None) -> Curve:
    """One point per step: the given rank's, or the mean over ranks (newest time)."""
    if rank is not None:
        keep = raw.rank == rank
        step, time, value = raw.step[keep], raw.time[keep], raw.value[keep]
    else:
        step, time, value = raw.step, raw.time, raw.value
    if not len(step):
        return EMPTY_CURVE
    order = np.argsort(step, kind="stable")
    step, time, value = step[order], time[order], value[order]
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    if len(starts) == len(step):
        return Curve(step, time, value)
    counts = np.diff(np.r_[starts, len(step)])
    return Curve(
        step[starts],
        np.maximum.reduceat(time, starts),
        np.add.reduceat(value, starts) / counts,
    )


def merge_attempts(curves: list[Curve]) -> Curve:
    """Attempts in order; a later attempt's points replace an earlier one's at the same step."""
    curves = [c for c in curves if len(c.step)]
    if len(curves) <= 1:
        return curves[0] if curves else EMPTY_CURVE
    number = np.concatenate([np.full(len(c.step), i) for i, c in enumerate(curves)])
    step = np.concatenate([c.step for c in curves])
    order = np.lexsort((number, step))
    step = step[order]
    last = np.r_[step[1:] != step[:-1], True]
    pick = order[last]
    return Curve(
        np.concatenate([c.step for c in curves])[pick],
        np.concatenate([c.time for c in curves])[pick],
        np.concatenate([c.value for c in curves])[pick],
    )


def downsample(curve: Curve, points: int, x: XAxis = "step") -> Curve:
    """At most `points` points chosen by LTTB along x (0: every point)."""
    if x != "step" and len(curve.time) and np.any(np.diff(curve.time) < 0):
        order = np.argsort(curve.time, kind="stable")
        curve = Curve(curve.step[order], curve.time[order], curve.value[order])
    if points <= 0 or len(curve.step) <= points:
        return curve
    xs = curve.step if x == "step" else curve.time
    keep = LTTBDownsampler().downsample(xs, curve.value, n_out=max(3, points))
    return Curve(curve.step[keep], curve.time[keep], curve.value[keep])


def lower_is_better(name: str) -> bool:
    """Loss-, error-, time- and memory-like metrics are best when lowest; others when highest."""
    lowered = name.lower()
    return any(word in lowered for word in LOWER_IS_BETTER)


def direction(name: str, declared: str | None = None) -> Direction:
    """The one rule for a metric's best end: what the job declared for it, else its name's.

    Declared ("min", "max" or "none") comes from the SDK's `sdk.declare` or a template;
    undeclared, gradient norms, learning rates and scales have no best end, loss-, error-,
    time- and memory-like names are best lowest, and any other is best highest.
    """
    if declared in DECLARED:
        return DECLARED[declared]  # type: ignore[return-value]
    lowered = name.lower()
    words = lowered.replace("/", "_").replace("-", "_").replace(".", "_").split("_")
    if any(word in NEITHER for word in words) or "learning_rate" in lowered:
        return None
    return "min" if lower_is_better(name) else "max"


def summary(
    name: str, curve: Curve, declared: str | None = None
) -> dict[str, float | int | str | None]:
    """Final, min, max and best (by the metric's direction; none without one) with steps."""
    best_end = direction(name, declared)
    finite = np.isfinite(curve.value)
    if not finite.any():
        empty = ("final", "final_step", "min", "max", "best", "best_step")
        return {**dict.fromkeys(empty), "direction": best_end}
    values = np.where(finite, curve.value, np.nan)
    best = None
    if best_end is not None:
        best = int(np.nanargmin(values) if best_end == "min" else np.nanargmax(values))
    return {
        "final": float(curve.value[-1]),
        "final_step": int(curve.step[-1]),
        "min": float(np.nanmin(values)),
        "max": float(np.nanmax(values)),
        "best": None if best is None else float(curve.value[best]),
        "best_step": None if best is None else int(curve.step[best]),
        "direction": best_end,
    }
