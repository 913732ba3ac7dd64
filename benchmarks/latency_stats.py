"""Summaries of measured latencies: percentiles, and where in a run the slow items were."""

from __future__ import annotations

import statistics
from typing import Any


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {
        "n": len(ordered),
        "p50_ms": pick(0.50),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": ordered[-1] * 1000,
        "mean_ms": statistics.fmean(ordered) * 1000,
    }


def stalls(samples: list[tuple[float, float]], *, bucket: float = 0.25) -> list[dict[str, Any]]:
    """The buckets of publish time (`bucket` s) whose slowest item took over 50 ms, in order:
    a pipeline stall shows as a run of them. `samples`: (publish time, latency)."""
    if not samples:
        return []
    first = min(sent for sent, _ in samples)
    buckets: dict[int, list[float]] = {}
    for sent, latency in samples:
        buckets.setdefault(int((sent - first) / bucket), []).append(latency)
    return [
        {"at_s": index * bucket, "n": len(values), "max_ms": max(values) * 1000}
        for index, values in sorted(buckets.items())
        if max(values) > 0.05
    ]
