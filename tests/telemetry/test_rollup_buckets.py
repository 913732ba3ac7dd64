"""Curve rollups' bucket arithmetic: each bucket's first min and max, joined across ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.telemetry.series import rollups
from backend.telemetry.series.curves import Curve


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300),
    width=st.sampled_from([1, 2, 3, 7, 16]),
    first=st.integers(0, 40),
)
def test_bucket_extremes_are_each_buckets_first_min_and_max(
    values: list[float], width: int, first: int
) -> None:
    step = np.arange(first, first + len(values), dtype=np.int64)
    curve = Curve(step, step * 2.0, np.array(values))
    got = rollups.bucket_extremes(curve, width)
    for column, bucket in enumerate(sorted(set((step // width).tolist()))):
        inside = np.flatnonzero(step // width == bucket)
        low = inside[np.argmin(curve.value[inside])]
        high = inside[np.argmax(curve.value[inside])]
        expected = [step[low], step[low] * 2.0, curve.value[low]]
        expected += [step[high], step[high] * 2.0, curve.value[high]]
        assert got[:, column].tolist() == expected


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=300),
    width=st.sampled_from([1, 2, 3, 7, 16]),
    first=st.integers(-40, 40),
    cut=st.integers(1, 299),
)
def test_joining_two_ranges_extremes_equals_the_extremes_of_both(
    values: list[float], width: int, first: int, cut: int
) -> None:
    step = np.arange(first, first + len(values), dtype=np.int64)
    curve = Curve(step, step * 2.0, np.array(values))
    cut = min(cut, len(values) - 1)
    before = Curve(step[:cut], curve.time[:cut], curve.value[:cut])
    after = Curve(step[cut:], curve.time[cut:], curve.value[cut:])
    joined = rollups.join_extremes(
        rollups.bucket_extremes(before, width), rollups.bucket_extremes(after, width), width
    )
    assert np.array_equal(joined, rollups.bucket_extremes(curve, width))


def test_levels_double_up_to_the_block() -> None:
    assert rollups.widths()[:3] == [16, 32, 64]
    assert rollups.widths()[-1] == rollups.BLOCK_STEPS
