"""A supervisor's end of the ranks' telemetry pipes, in a process of its own, for benchmarks.

    python -m benchmarks.relay_sink [--xadds] [--flush-ms MS] REDIS_URL STREAM ATTEMPT_ID [FD ...]

One real `TelemetryRelay` per pipe (stdin when no FD is named; rank i reads the i-th),
stamping ATTEMPT_ID, the rank and the time on every point, sharing one real
`StreamPublisher` for points (STREAM) and one for events (STREAM:events), as a
Supervisor's relays share its publishers. When every pipe is closed and everything read
is in Redis, it prints one JSON line: points published, items refused, and this process's
CPU seconds (every thread) and wall seconds from the relays' start to the last XADD.
With `--xadds` it also lists every XADD of points: (time before, time after, entry id,
{rank: newest step of that rank in the batch}), for `benchmarks.live_hops` (one dict
update per point on the publisher thread; off by default). `--flush-ms`: the points
publisher's flush interval (default: the publisher's own).

Benchmarks start it with `RelayProcess`: the measured process is the rank (the SDK's
JSON encoding and pipe write run on its thread), this one does the supervisor's work.
Its CPU includes the publisher thread's wake-ups (at most one a `FLUSH_INTERVAL`). It says
"ready" once its relays read, and `RelayProcess` waits for that, so a rank's first points
do not wait in a full pipe while this process imports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the attempt id the relay stamps on every point unless told another
ATTEMPT_ID = 999_998


@dataclass(frozen=True)
class RelayStats:
    """What the relay process did, from its relays' start until the last XADD."""

    points: int
    refused: int
    cpu_s: float
    wall_s: float
    #: with `xadds=True`: (before, after, entry id, {rank: newest step}) of each XADD of points
    xadds: list[tuple[float, float, str, dict[str, int]]] = field(default_factory=list)

    def cpu_us_per_point(self) -> float:
        return self.cpu_s / max(self.points, 1) * 1e6


class RelayProcess:
    """`python -m benchmarks.relay_sink` as a child, reading `ranks` pipes.

    `fds[i]` is the write end of rank i's pipe (what the supervisor passes a rank as
    TRAINBOARD_TELEMETRY_FD). Close them all (the rank's channel does), then `finish()`.
    """

    def __init__(
        self,
        redis_url: str,
        stream: str,
        *,
        attempt_id: int = ATTEMPT_ID,
        ranks: int = 1,
        xadds: bool = False,
        flush_ms: float | None = None,
    ) -> None:
        pipes = [os.pipe() for _ in range(ranks)]
        self.fds = [write for _, write in pipes]
        reads = [read for read, _ in pipes]
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.relay_sink", *(["--xadds"] if xadds else [])]
                + ([] if flush_ms is None else ["--flush-ms", str(flush_ms)])
                + [redis_url, stream]
                + [str(attempt_id), *map(str, reads)],
                pass_fds=reads,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
        finally:
            for fd in reads:
                os.close(fd)  # the child holds the only reading ends
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()  # its imports done, its relays reading
        assert ready == "ready\n", ready

    def finish(self, timeout: float = 60.0) -> RelayStats:
        """Wait for the child to publish everything (every write end must be closed)."""
        out, _ = self._process.communicate(timeout=timeout)
        assert self._process.returncode == 0, out
        return RelayStats(**json.loads(out.splitlines()[-1]))


def _relay(
    redis_url: str,
    stream: str,
    attempt_id: int,
    fds: list[int],
    *,
    xadds: bool = False,
    flush_ms: float | None = None,
) -> RelayStats:
    from workers.contract.heap import settle_heap
    from workers.supervisor.relay import TelemetryRelay
    from workers.telemetry import FLUSH_INTERVAL, StreamPublisher

    class CountingPublisher(StreamPublisher):
        """The real publisher, counting what the relays queue."""

        count = 0
        _counting = threading.Lock()
        xadds: list[tuple[float, float, str, dict[str, int]]] = []
        recording = False

        def add_many(self, items: Iterable[dict[str, Any]]) -> None:
            items = items if isinstance(items, list) else list(items)
            with self._counting:  # one relay thread per rank
                self.count += len(items)
            super().add_many(items)

        def _xadd(self, batch: dict[str, Any]) -> Any:
            if not self.recording:
                return super()._xadd(batch)
            before = time.time()
            entry_id = super()._xadd(batch)
            after = time.time()
            newest = {}
            for item in batch["items"]:  # in step order per rank: the last is the newest
                newest[item["rank"]] = item["step"]
            self.xadds.append((before, after, entry_id.decode(), newest))
            return entry_id

    flush = FLUSH_INTERVAL if flush_ms is None else flush_ms / 1000
    metrics = CountingPublisher(redis_url, stream, "bench-relay", flush_interval=flush)
    metrics.recording = xadds
    events = StreamPublisher(redis_url, f"{stream}:events", "bench-relay")
    with tempfile.TemporaryDirectory() as checkpoints:
        began, began_cpu = time.perf_counter(), time.process_time()
        relays = [
            TelemetryRelay(
                fd,
                attempt_id=attempt_id,
                rank=rank,
                metrics=metrics,
                events=events,
                checkpoint_dir=Path(checkpoints),
            )
            for rank, fd in enumerate(fds)
        ]
        settle_heap()  # as the worker does once started (workers/contract/heap.py)
        print("ready", flush=True)
        for relay in relays:
            relay.join()
        metrics.close(timeout=60)
        events.close(timeout=60)
        wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    refused = sum(relay.refused for relay in relays)
    return RelayStats(
        points=metrics.count, refused=refused, cpu_s=cpu, wall_s=wall, xadds=metrics.xadds
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--xadds", action="store_true")
    parser.add_argument("--flush-ms", type=float, default=None)
    parser.add_argument("redis_url")
    parser.add_argument("stream")
    parser.add_argument("attempt_id", type=int)
    parser.add_argument("fds", type=int, nargs="*")
    args = parser.parse_args()
    stats = _relay(
        args.redis_url,
        args.stream,
        args.attempt_id,
        args.fds or [0],
        xadds=args.xadds,
        flush_ms=args.flush_ms,
    )
    print(json.dumps(stats.__dict__), flush=True)
