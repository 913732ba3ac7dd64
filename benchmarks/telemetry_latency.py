"""Live delivery latency: publish → websocket frame, and fan-out to many `cluster` clients.

    python -m benchmarks.telemetry_latency latency [--rate 10000] [--seconds 20]
        [--via relay,direct]
    python -m benchmarks.telemetry_latency fanout [--clients 1000] [--seconds 20]
        [--deflate] [--eager]

Three processes on one machine: the API (uvicorn, SQLite, its in-process ingest and
live tail, as `TRAINBOARD_RUN_INGEST=true` runs it), a producer process with the real
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
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend.config import Settings
from backend.db import Database
from backend.migrate import upgrade
from backend.nodes.deployment import deployment_id
from benchmarks.latency_stats import percentiles, stalls
from benchmarks.live_producers import produce_cluster, produce_metrics, produce_via_relay
from benchmarks.own_redis import own_redis
from benchmarks.raw_ws import Bursts, raw_client
from tests.app_settings import ADMIN_TOKEN, api_settings
from tests.telemetry.helpers import LiveServer, add_attempt, receive, subscribe
from workers.contract.heap import settle_heap
from workers.contract.keys import Keys
from workers.telemetry import FLUSH_INTERVAL

WARMUP_SECONDS = 2.0
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _serve(settings: Settings, ready: Any, stop: Any) -> None:
    with LiveServer.running(settings) as server:
        ready.put(server.port)
        stop.wait()


@contextlib.contextmanager
def api_server(tmp: Path, redis_url: str) -> Iterator[tuple[int, Database]]:
    """The API in its own process on a fresh SQLite database; (port, database)."""
    url = f"sqlite:///{tmp / 'live.db'}"
    upgrade(url)
    settings = api_settings(tmp, database_url=url, redis_url=redis_url, hosts="127.0.0.1")
    context = mp.get_context("spawn")
    ready, stop = context.Queue(), context.Event()
    process = context.Process(target=_serve, args=(settings, ready, stop), daemon=True)
    process.start()
    db = Database(url)
    try:
        yield ready.get(timeout=60), db
    finally:
        stop.set()
        process.join(15)
        if process.is_alive():
            process.kill()
        db.dispose()


def deployment_keys(db: Database) -> Keys:
    """The Redis names of the API's deployment: its ingest reads only those streams."""
    with db.session() as session:
        return Keys(deployment_id(session))


def bench_latency(rate: float, seconds: float, flush: float, via: list[str]) -> dict[str, Any]:
    """Each path of `via` in turn (a fresh attempt each) on one API server and Redis."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(Path(tmp), redis_url) as (port, db),
    ):
        return {path: _latency_run(port, db, redis_url, path, rate, seconds, flush) for path in via}


def _latency_run(
    port: int, db: Database, redis_url: str, via: str, rate: float, seconds: float, flush: float
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
    if via == "relay":
        producer = context.Process(
            target=produce_via_relay,
            args=(redis_url, keys, attempt_id, rate, seconds, relay_stats),
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
    received = 0
    first: float | None = None
    expected = int(rate * seconds)
    deadline = time.monotonic() + seconds + 60
    while received < expected and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            text = ws.recv(timeout=1.0)
            now = time.time()
            message = json.loads(text)
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
    result["load_after"] = os.getloadavg()
    result["wall_s"] = time.time() - began
    result["stalls"] = stalls(list(zip(sent_at, latencies, strict=True)))
    if via == "relay":
        result["relay_hop"] = percentiles(hops)
        stats = relay_stats.get(timeout=30)
        stats["cpu_us_per_point"] = stats["cpu_s"] / max(stats["points"], 1) * 1e6
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
        help="latency: the paths to measure, in order (relay: rank pipe → relay; direct)",
    )
    args = parser.parse_args()
    result: dict[str, Any]
    if args.which == "latency":
        flush = args.flush_ms / 1000 if args.flush_ms else FLUSH_INTERVAL
        result = bench_latency(args.rate, args.seconds, flush, args.via.split(","))
    else:
        result = bench_fanout(args.clients, args.seconds, deflate=args.deflate, eager=args.eager)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
