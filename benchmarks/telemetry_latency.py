"""Live delivery latency: publish → websocket frame, and fan-out to many `cluster` clients.

    python -m benchmarks.telemetry_latency latency [--rate 10000] [--seconds 20]
        [--via relay,direct] [--ingest api|process]
    python -m benchmarks.telemetry_latency fanout [--clients 1000] [--seconds 20]
        [--deflate] [--eager]

Three processes on one machine: the API (uvicorn, SQLite, its in-process ingest and
live tail, as `TRAINBOARD_RUN_INGEST=true` runs it; with `--ingest process` the ingest runs
in a fourth, `trainboard ingest`'s, as `trainboard up` runs it), a producer process with the real
`StreamPublisher`s, and the measuring websocket client(s); and a redis-server of the
run's own on a free port (`redis-server` must be on PATH). Every item carries its
publish time (`time`, unix seconds, taken when `add()` is called); a client's latency
for an item is its receive time minus that, on the same clock.

latency: one client on `job:<id>`; `--rate` metric points/s from 8 ranks, by each path
of `--via`, one after the other on the same API and Redis:
- relay (what ranks do): the producer process plays the 8 ranks; each point is one
  JSON line (`sdk.report(step, loss=...)`'s message) written with the real
  `TelemetryChannel` to that rank's pipe, read by a real `TelemetryRelay` per pipe in a
  child process of the producer (`benchmarks.relay_sink`, the supervisor's part), which
  stamps attempt, rank and time and publishes with a real `StreamPublisher`. The point's
  value is its write time, so latency = receive time − value: the pipe and relay hop
  included; `relay_hop` is the relay's stamp − the write time.
- direct (the path before ranks lost their Redis URL): one `StreamPublisher` in the
  producer, latency from `add()`.
fanout: `--clients` clients on `cluster`; the producer publishes 8 GPU samples every
second (one node) and 5 jobs × 10 steps/s × 4 metric names; latency per client and
sample, twice: `arrived` (the kernel's receive timestamp on the client's socket, i.e.
when the server's write went through loopback) and `read` (when the measuring process
read it). The clients are raw sockets in one asyncio process that split frames and
parse JSON after the run. By default they read each burst 0.25 s after it began, so
that 1,000 wake-ups do not compete with the server for the same cores while it is
still sending (`read` then says nothing); `--eager` reads each frame as it arrives.
`--deflate`: the clients ask for permessage-deflate, as browsers do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config import Settings
from backend.db import Database
from backend.ingest_process import run_ingest_process
from backend.migrate import upgrade
from backend.nodes.deployment import deployment_id
from benchmarks.latency_stats import percentiles, stalls
from benchmarks.live_hops import (
    ApiHops,
    HopsLink,
    Received,
    join,
    loopback,
    merged,
    ratio,
    record_api_hops,
)
from benchmarks.live_producers import (
    RelayWindows,
    produce_cluster,
    produce_metrics,
    produce_via_relay,
)
from benchmarks.own_redis import own_redis
from benchmarks.raw_ws import Bursts, raw_client
from benchmarks.spawned import spawned
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.telemetry.helpers import LiveServer, add_attempt, receive, subscribe
from workers.contract.heap import settle_heap
from workers.contract.keys import Keys
from workers.telemetry import FLUSH_INTERVAL

WARMUP_SECONDS = 2.0
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _serve(settings: Settings, link: HopsLink | None, ready: Any, stop: Any) -> None:
    hops = record_api_hops() if link is not None else None
    with LiveServer.running(settings) as server:
        ready.put(server.port)
        if link is None or hops is None:
            stop.wait()
        else:
            link.answer_until(stop, hops)


def _ingest_apart(settings: Settings, link: HopsLink | None, ready: Any, stop: Any) -> None:
    """`trainboard ingest`'s process (`run_ingest_process`) until stop is set, which a thread
    turns into the SIGTERM that `trainboard up` would send it."""
    hops = record_api_hops() if link is not None else None

    def until_stopped() -> None:
        if link is None or hops is None:
            stop.wait()
        else:
            link.answer_until(stop, hops)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=until_stopped, daemon=True).start()
    ready.put(os.getpid())
    run_ingest_process(settings)


@contextlib.contextmanager
def api_server(
    tmp: Path,
    redis_url: str,
    *,
    link: HopsLink | None = None,
    ingest_link: HopsLink | None = None,
    ingest_apart: bool = False,
) -> Iterator[tuple[int, Database]]:
    """The API in its own process on a fresh SQLite database; (port, database). With a
    link, the API's process records its per-hop times (`benchmarks.live_hops`). With
    `ingest_apart`, the ingest runs in a process of its own, as `trainboard up` runs it (its
    hops recorded through `ingest_link`); else in the API's (`run_ingest`)."""
    url = f"sqlite:///{tmp / 'live.db'}"
    upgrade(url)
    settings = api_settings(
        tmp, database_url=url, redis_url=redis_url, hosts="127.0.0.1", run_ingest=not ingest_apart
    )
    with contextlib.ExitStack() as processes:
        port = processes.enter_context(spawned(_serve, settings, link))
        if ingest_apart:
            processes.enter_context(spawned(_ingest_apart, settings, ingest_link))
        db = Database(url)
        try:
            yield port, db
        finally:
            db.dispose()


def deployment_keys(db: Database) -> Keys:
    """The Redis names of the API's deployment: its ingest reads only those streams."""
    with db.session() as session:
        return Keys(deployment_id(session))


@dataclass(frozen=True)
class Path_:
    """One way points travel in a latency run: `relay` or `direct`, with the windows that
    hold them (None: the code's defaults). Written `relay`, `direct`, or `relay@P/C`:
    the relay's publisher flushes every P ms and each rank's pipe writer every C ms."""

    via: str
    publisher_ms: float | None = None
    pipe_ms: float | None = None

    @classmethod
    def parse(cls, text: str) -> Path_:
        via, _, windows = text.partition("@")
        if via not in ("relay", "direct") or (windows and via != "relay"):
            raise ValueError(f"not a path: {text!r} (relay, direct or relay@P/C)")
        if not windows:
            return cls(via)
        publisher, _, pipe = windows.partition("/")
        return cls(via, float(publisher), float(pipe) if pipe else None)


def bench_latency(
    rate: float,
    seconds: float,
    flush: float,
    via: list[str],
    *,
    rounds: int = 1,
    ranks: int = 8,
    names: int = 1,
    baseline_seconds: float = 10.0,
    ingest_apart: bool = False,
) -> list[dict[str, Any]]:
    """Each path of `via` in turn (a fresh attempt each) on one API server and Redis, for
    `rounds` rounds; each run preceded by a loopback baseline (`benchmarks.live_hops`).
    `ingest_apart`: the ingest in a process of its own (`trainboard up`'s way)."""
    paths = [Path_.parse(text) for text in via]
    link = HopsLink(mp.get_context("spawn"))
    ingest_link = HopsLink(mp.get_context("spawn")) if ingest_apart else None

    def take() -> ApiHops:
        api = link.take()
        return api if ingest_link is None else merged(api, ingest_link.take())

    results = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(
            Path(tmp), redis_url, link=link, ingest_link=ingest_link, ingest_apart=ingest_apart
        ) as (port, db),
    ):
        for round_ in range(rounds):
            for path, text in zip(paths, via, strict=True):
                result: dict[str, Any] = {"path": text, "round": round_ + 1}
                result["ingest"] = "process" if ingest_apart else "api"
                if baseline_seconds:
                    result["loopback"] = loopback(redis_url, seconds=baseline_seconds)
                run = _latency_run(
                    port, db, redis_url, path, rate, seconds, flush, ranks=ranks, names=names
                )
                points, xadds = run.pop("received_points", None), run.pop("xadds", None)
                result.update(run)
                if points is not None and xadds is not None:
                    result["hops"] = join(points, xadds, take(), warmup=WARMUP_SECONDS)
                else:
                    take()  # cleared for the next run
                if baseline_seconds:
                    result["ratio_to_loopback"] = ratio(result, result["loopback"])
                results.append(result)
                print(json.dumps(_summary(result)), file=sys.stderr, flush=True)
    return results


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """One line per run while the benchmark goes on."""
    keys = ("path", "ingest", "round", "p50_ms", "p99_ms", "received", "expected", "load_after")
    return {k: result.get(k) for k in keys} | {
        "loopback_p99": result.get("loopback", {}).get("p99_ms")
    }


def _latency_run(
    port: int,
    db: Database,
    redis_url: str,
    path: Path_,
    rate: float,
    seconds: float,
    flush: float,
    *,
    ranks: int,
    names: int,
) -> dict[str, Any]:
    from websockets.sync.client import connect

    job_id, attempt_id = add_attempt(db)
    keys = deployment_keys(db)
    ws = connect(f"ws://127.0.0.1:{port}/api/ws", additional_headers=HEADERS, max_size=None)
    subscribe(ws, f"job:{job_id}")
    assert receive(ws)["type"] == "snapshot"
    # the measuring client's own full collections are not the server's latency (a browser
    # has its own collector); the API and the relay settle their heaps the same way
    settle_heap()
    context = mp.get_context("spawn")
    relay_stats = context.Queue()
    via = path.via
    if via == "relay":
        windows = RelayWindows(ranks, names, path.publisher_ms, path.pipe_ms)
        producer = context.Process(
            target=produce_via_relay,
            args=(redis_url, keys, attempt_id, rate, seconds, relay_stats, windows),
        )
    else:
        producer = context.Process(
            target=produce_metrics, args=(redis_url, keys, attempt_id, rate, seconds, flush)
        )
    began = time.time()
    producer.start()
    latencies: list[float] = []
    sent_at: list[float] = []  # each counted item's publish time, for `stalls`
    hops: list[float] = []  # relay: the relay's stamp − the rank's write
    points = Received()
    received = 0
    first: float | None = None
    expected = int(rate * seconds)
    deadline = time.monotonic() + seconds + 60
    while received < expected and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            text = ws.recv(timeout=1.0)
            now = time.time()
            message = json.loads(text)
            if via == "relay":
                points.add(message, now)
            for point in message.get("data", {}).get("metrics", []):
                received += 1
                sent = point["value"] if via == "relay" else point["time"]
                first = first or sent
                if sent - first >= WARMUP_SECONDS:
                    latencies.append(now - sent)
                    sent_at.append(sent)
                    if via == "relay":
                        hops.append(point["time"] - sent)
    producer.join(30)
    ws.close()
    result: dict[str, Any] = {**percentiles(latencies), "received": received}
    result["expected"] = expected
    if via == "relay":
        result["delivered"] = points.delivered()
    result["load_after"] = os.getloadavg()
    result["wall_s"] = time.time() - began
    result["stalls"] = stalls(list(zip(sent_at, latencies, strict=True)))
    if via == "relay":
        result["relay_hop"] = percentiles(hops)
        stats = relay_stats.get(timeout=30)
        result["xadds"] = stats.pop("xadds")
        result["received_points"] = points
        stats["cpu_us_per_point"] = stats["cpu_s"] / max(stats["points"], 1) * 1e6
        stats["xadds_per_s"] = len(result["xadds"]) / max(stats["wall_s"], 1e-9)
        result["relay_process"] = stats
    return result


async def _fanout_clients(
    port: int, count: int, seconds: float, ready: threading.Event, *, deflate: bool, eager: bool
) -> tuple[list[float], list[float], dict[str, int]]:
    """Latencies of every sample at every client after the warm-up (arrived, read); caveats."""
    clients = [
        await raw_client(port, "cluster", token=ADMIN_TOKEN, deflate=deflate) for _ in range(count)
    ]
    await asyncio.sleep(2.0)  # every snapshot sent
    bursts = None if eager else Bursts(clients, delay=0.25)
    ready.set()
    await asyncio.sleep(seconds + 5)
    if bursts is not None:
        bursts.close()
    samples: list[tuple[float, float, float]] = []  # (sample time, arrived, read)
    for client in clients:
        for arrived, read, message in client.messages():
            for sample in message.get("data", {}).get("samples", []):
                samples.append((sample["time"], arrived, read))
    first = min((t for t, _, _ in samples), default=0.0)
    counted = [(t, arrived, read) for t, arrived, read in samples if t - first >= WARMUP_SECONDS]
    caveats = {
        "frames_without_kernel_timestamp": sum(client.unstamped for client in clients),
        "frames_read_with_a_later_one": sum(client.shared for client in clients),
    }
    arrivals, reads = [a - t for t, a, _ in counted], [r - t for t, _, r in counted]
    return arrivals, reads, caveats


def bench_fanout(clients: int, seconds: float, *, deflate: bool, eager: bool) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(Path(tmp), redis_url) as (port, db),
    ):
        attempts = [add_attempt(db)[1] for _ in range(5)]
        ready = threading.Event()

        def start_producer() -> None:
            ready.wait()
            producer = mp.get_context("spawn").Process(
                target=produce_cluster, args=(redis_url, deployment_keys(db), attempts, seconds)
            )
            producer.start()
            producer.join(seconds + 60)

        thread = threading.Thread(target=start_producer, daemon=True)
        thread.start()
        connecting = time.perf_counter()
        arrived, read, caveats = asyncio.run(
            _fanout_clients(port, clients, seconds, ready, deflate=deflate, eager=eager)
        )
        thread.join(60)
        return {
            "arrived": percentiles(arrived) if arrived else {"n": 0},
            "read": percentiles(read) if read else {"n": 0},
            **caveats,
            "clients": clients,
            "deflate": deflate,
            "eager": eager,
            "expected": clients * 8 * int(seconds - WARMUP_SECONDS),  # about
            "connect_and_run_s": time.perf_counter() - connecting,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["latency", "fanout"])
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--deflate", action="store_true", help="fanout: clients ask for permessage-deflate"
    )
    parser.add_argument(
        "--eager", action="store_true", help="fanout: clients read each frame as it arrives"
    )
    parser.add_argument(
        "--flush-ms",
        type=float,
        default=None,
        help="direct: the publisher's flush interval (its default; the relay's is the default)",
    )
    parser.add_argument(
        "--via",
        default="relay,direct",
        help="latency: the paths to measure, in order (relay: rank pipe → relay; direct; "
        "relay@P/C: the relay's publisher flushing every P ms, the ranks' pipes every C ms)",
    )
    parser.add_argument(
        "--ingest",
        choices=["api", "process"],
        default="api",
        help="latency: the ingest in the API's process (run_ingest) or in one of its own "
        "(`trainboard ingest`, as `trainboard up` runs it)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="latency: every path, N times")
    parser.add_argument("--ranks", type=int, default=8, help="latency: ranks (relay)")
    parser.add_argument("--names", type=int, default=1, help="latency: metrics a report (relay)")
    parser.add_argument(
        "--baseline-seconds",
        type=float,
        default=10,
        help="latency: the loopback baseline before each run (0: none)",
    )
    args = parser.parse_args()
    result: Any
    if args.which == "latency":
        flush = args.flush_ms / 1000 if args.flush_ms else FLUSH_INTERVAL
        result = bench_latency(
            args.rate,
            args.seconds,
            flush,
            args.via.split(","),
            rounds=args.rounds,
            ranks=args.ranks,
            names=args.names,
            baseline_seconds=args.baseline_seconds,
            ingest_apart=args.ingest == "process",
        )
    else:
        result = bench_fanout(args.clients, args.seconds, deflate=args.deflate, eager=args.eager)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
