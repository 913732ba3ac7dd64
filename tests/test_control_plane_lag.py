"""The control-plane benchmark's ingest-lag bookkeeping (benchmarks/control_plane_scale.py)."""

from __future__ import annotations

import pytest

from benchmarks.control_plane_scale import commit_times, stream_id


def test_stream_ids_compare_by_time_then_sequence() -> None:
    assert stream_id(b"1700000000123-4") == (1_700_000_000_123, 4)
    assert stream_id("5") == (5, 0)
    assert stream_id("10-2") > stream_id("9-99") > stream_id("9-3")


def test_an_entry_counts_committed_once_delivered_and_older_than_every_pending_one() -> None:
    written = [((1, 0), 10.0), ((2, 0), 10.1), ((3, 0), 10.2), ((4, 0), 10.3)]
    polls = [
        (10.15, (0, 0), None),  # nothing delivered yet
        (10.25, (3, 0), (2, 0)),  # 1 acknowledged; 2 and 3 delivered but 2 still pending
        (10.40, (3, 0), None),  # 2 and 3 acknowledged; 4 not delivered
        (10.50, (4, 0), (4, 0)),  # 4 delivered, pending
    ]
    lags = commit_times(written, polls)
    assert lags == pytest.approx([0.25, 0.30, 0.20])  # entry 4 was never seen committed


def test_a_poll_before_a_write_gives_no_negative_lag() -> None:
    assert commit_times([((1, 0), 5.0)], [(4.999, (1, 0), None)]) == [0.0]
