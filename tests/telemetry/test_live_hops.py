"""The live-delivery benchmark's per-hop times (benchmarks/live_hops.py): how a point is
joined to its XADD, its ingest round and its delta, and a short real run end to end."""

from __future__ import annotations

import pytest

from benchmarks.live_hops import HOPS, ApiHops, Received, join
from benchmarks.telemetry_latency import bench_latency


def _point(rank: int, step: int, report: float) -> dict[str, object]:
    return {"rank": rank, "step": step, "value": report, "time": report + 0.001}


def test_a_point_is_joined_to_its_batch_its_round_and_its_delta() -> None:
    received = Received()
    # rank 0's steps 0-1 and rank 1's step 0 went in the first XADD, rank 0's step 2 in the next
    received.add({"pos": "100020-0", "data": {"metrics": [_point(0, 0, 100.000)]}}, 100.030)
    received.add(
        {"pos": "100021-0", "data": {"metrics": [_point(0, 1, 100.001), _point(1, 0, 100.001)]}},
        100.031,
    )
    received.add({"pos": "100040-0", "data": {"metrics": [_point(0, 2, 100.010)]}}, 100.050)
    xadds = [
        (100.005, 100.006, "100005-0", {"0": 1, "1": 0}),
        (100.025, 100.026, "100025-3", {"0": 2}),
    ]
    api = ApiHops(
        read=[((100005, 0), 100.010), ((100025, 3), 100.030)],
        validated=[((100005, 0), 100.011), ((100025, 3), 100.031)],
        committed=[((100005, 0), 100.015), ((100025, 3), 100.035)],
        done=[((100005, 0), 100.016), ((100025, 3), 100.036)],
        tail={"100020-0": 100.021, "100021-0": 100.022, "100040-0": 100.041},
        sent={"100020-0": 100.025, "100021-0": 100.026, "100040-0": 100.045},
    )

    result = join(received, xadds, api, warmup=0.0)

    assert result["n"] == 4 and result["unjoined"] == 0
    last = result["since_report"]
    # the slowest point: rank 0 step 2, reported at 100.010, read by the client at 100.050
    assert last["received"]["max_ms"] == pytest.approx(40.0)
    assert last["received"]["p50_ms"] == pytest.approx(30.0)  # rank 1 step 0 (of 4 points)
    # rank 0 step 2 waited in the relay's publisher from 100.011 to the second XADD at 100.025
    assert result["hops"]["relay→xadd"]["max_ms"] == pytest.approx(14.0)
    # the second delta's tb:live entry id says 100.021, 6 ms after its round committed
    assert result["hops"]["committed→published"]["max_ms"] == pytest.approx(6.0)
    assert list(result["hops"]) == [f"{a}→{b}" for a, b in zip(HOPS, HOPS[1:], strict=False)]
    assert result["ingest_rounds"]["rounds"] == 2


def test_a_point_missing_from_the_api_records_is_counted_unjoined() -> None:
    received = Received()
    received.add({"pos": "5-0", "data": {"metrics": [_point(0, 0, 1.0)]}}, 1.01)
    result = join(received, [(1.0, 1.0, "1000-0", {"0": 0})], ApiHops(), warmup=0.0)
    assert result == {"n": 0, "unjoined": 1}


def test_received_points_say_whether_each_ranks_steps_came_in_order() -> None:
    received = Received()
    received.add({"pos": "1-0", "data": {"metrics": [_point(0, 1, 1.0), _point(1, 0, 1.0)]}}, 2)
    assert received.delivered() == {"distinct_rank_steps": 2, "in_order_per_rank": True}
    received.add({"pos": "2-0", "data": {"metrics": [_point(0, 0, 1.0)]}}, 2)
    assert received.delivered()["in_order_per_rank"] is False


@pytest.mark.slow
def test_a_short_real_run_times_every_hop_of_every_point() -> None:
    [run] = bench_latency(500, 4.0, 0.02, ["relay"], ranks=2, names=2, baseline_seconds=1.5)

    assert run["received"] == run["expected"] == 2000
    assert run["delivered"] == {"distinct_rank_steps": 1000, "in_order_per_rank": True}
    hops = run["hops"]
    assert hops["unjoined"] == 0 and hops["n"] == run["n"] > 0
    assert hops["ingest_rounds"]["rounds"] > 0
    assert set(hops["api_threads"]["trainboard-ingest"]) == {"cpu_s", "waited_for_a_core_s"}
    assert all(hop["p50_ms"] >= -1.0 for hop in hops["hops"].values())
    assert run["loopback"]["n"] > 0 and run["ratio_to_loopback"]["p50_ms"] > 0
