"""The producer processes of `benchmarks.telemetry_latency`: ranks' metric points (through
their pipes and a relay, or a publisher of their own) and a node's cluster traffic."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from benchmarks.relay_sink import RelayProcess
from workers.contract.keys import Keys
from workers.contract.protocol import DEVICES_STREAM, METRICS_STREAM
from workers.contract.telemetry_channel import points_message
from workers.rank.channel import TelemetryChannel
from workers.telemetry import StreamPublisher


def pace(rate: float, seconds: float, emit: Any) -> None:
    """Call emit(i) rate times a second for seconds, catching up in 1 ms ticks."""
    started = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        due = min(int(elapsed * rate), int(seconds * rate))
        while sent < due:
            emit(sent)
            sent += 1
        time.sleep(0.001)
    while sent < int(seconds * rate):
        emit(sent)
        sent += 1


def produce_metrics(
    redis_url: str, keys: Keys, attempt_id: int, rate: float, seconds: float, flush: float
) -> None:
    stream = keys.stream(METRICS_STREAM)
    publisher = StreamPublisher(redis_url, stream, "bench-metrics", flush_interval=flush)

    def emit(i: int) -> None:
        publisher.add(
            {
                "attempt_id": attempt_id,
                "rank": i % 8,
                "step": i // 8,
                "name": "loss",
                "value": 1.0,
                "time": time.time(),
            }
        )

    pace(rate, seconds, emit)
    publisher.close()


@dataclass(frozen=True)
class RelayWindows:
    """How `produce_via_relay` plays the ranks: how many, metric names a report, and the
    relay publisher's and the pipe writers' flush intervals in ms (None: the defaults)."""

    ranks: int = 8
    names: int = 1
    publisher_ms: float | None = None
    pipe_ms: float | None = None


def produce_via_relay(
    redis_url: str,
    keys: Keys,
    attempt_id: int,
    rate: float,
    seconds: float,
    out: Any,
    windows: RelayWindows = RelayWindows(),
) -> None:
    """The ranks' pipes to a relay process; puts the relay's stats (a dict) on `out`.

    `rate` counts points: each report carries `windows.names` of them (loss, m1, m2...).
    The relay records its XADDs for `benchmarks.live_hops`.
    """
    stream = keys.stream(METRICS_STREAM)
    ranks = windows.ranks
    relay = RelayProcess(
        redis_url,
        stream,
        attempt_id=attempt_id,
        ranks=ranks,
        xadds=True,
        flush_ms=windows.publisher_ms,
    )
    pipe = {} if windows.pipe_ms is None else {"flush_interval": windows.pipe_ms / 1000}
    channels = [TelemetryChannel(fd, **pipe) for fd in relay.fds]
    names = ["loss", *(f"m{i}" for i in range(1, windows.names))]

    def emit(
        i: int,
    ) -> None:  # sdk.report(step, loss=...) on rank i % ranks, its send time as value
        now = time.time()
        channels[i % ranks].send(points_message([(i // ranks, dict.fromkeys(names, now))]))

    pace(rate / len(names), seconds, emit)
    for channel in channels:
        channel.close()
    out.put(relay.finish().__dict__)


def produce_cluster(redis_url: str, keys: Keys, attempt_ids: list[int], seconds: float) -> None:
    devices = StreamPublisher(redis_url, keys.stream(DEVICES_STREAM), "bench-agent")
    metrics = StreamPublisher(redis_url, keys.stream(METRICS_STREAM), "bench-ranks")
    names = ("loss", "accuracy", "lr", "throughput")

    def emit(tick: int) -> None:  # 10 ticks a second
        now = time.time()
        for attempt_id in attempt_ids:
            for name in names:
                point = {"attempt_id": attempt_id, "rank": 0, "step": tick, "name": name}
                metrics.add({**point, "value": 1.0, "time": now})
        if tick % 10 == 0:
            for device in range(8):
                sample = {"node": "node-a", "device": device, "kind": "gpu", "time": now}
                devices.add({**sample, "util": 50.0, "mem_used": 2**30, "mem_total": 2**34})

    pace(10, seconds, emit)
    devices.close()
    metrics.close()
