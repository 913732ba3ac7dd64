"""Hostile telemetry items are refused one by one, never able to fail a batch or bloat rows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workers.protocol import AttemptEvent, DeviceSample, LogLine, MetricPoint

GOOD = {"attempt_id": 1, "rank": 0, "step": 5, "name": "loss", "value": 1.0, "time": 1.0}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("step", 2**31),
        ("step", -1),
        ("rank", 2**40),
        ("attempt_id", 0),
        ("attempt_id", 10**30),
        ("name", ""),
        ("name", "x" * 129),
    ],
)
def test_metric_points_out_of_bounds_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MetricPoint.model_validate({**GOOD, field: value})


def test_other_items_bound_their_integers_and_text() -> None:
    with pytest.raises(ValidationError):
        LogLine(attempt_id=1, rank=0, seq=2**31, line="x", time=1.0)
    with pytest.raises(ValidationError):
        LogLine(attempt_id=1, rank=0, seq=1, line="x" * 8193, time=1.0)
    with pytest.raises(ValidationError):
        AttemptEvent(attempt_id=1, kind="checkpoint", step=2**31, time=1.0)
    with pytest.raises(ValidationError):
        DeviceSample(node="n", device=2**31, kind="cpu", time=1.0)
    assert MetricPoint.model_validate({**GOOD, "step": 2**31 - 1}).step == 2**31 - 1
