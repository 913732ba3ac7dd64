"""What one control plane carries: N simulated nodes heartbeating and M running jobs reporting.

    python -m benchmarks.control_plane_scale [--nodes 250,500,1000] [--jobs 100]
        [--seconds 60] [--warmup 10] [--steps-per-s 2] [--ranks 8] [--device-samples 8]

One API process per round, as `trainboard api` runs it (uvicorn, SQLite, its in-process
ingest, live tail and scheduler loop), on a redis-server of the run's own and a fresh
database. For each node count of `--nodes`:

- **Nodes** are real HTTP clients speaking the node protocol (`workers/node`): a node
  token bound to each node (issued in the database, as `trainboard node-token` does),
  `POST /api/nodes/register` with 8 GPUs, then `POST /api/nodes/<name>/heartbeat` every
  `heartbeat_interval` (the worker's default, 2 s; each node at a random phase) with the
  body a worker sends (instance, the attempts it runs, host load, disk), the next one an
  interval after the previous answer (the worker's heartbeat thread). All nodes are
  asyncio tasks on one httpx client in this process. A heartbeat's latency is from its
  send to its parsed reply; the event loop lag is how late a node's task woke (when that
  grows, this process, not the API, is the limit).
- **Jobs**: `--jobs` running jobs (an attempt and a running slice on node 0..M-1, owned by
  that node's instance, so its beats list it), each reporting as its supervisor's relay
  does: every step of every rank, the engine's six metric names, one stream entry per step
  (a `Batch` encoded by `workers.telemetry.encode`, the relay publisher's encoder) on the
  deployment's metrics stream, `--steps-per-s` steps a second per job at a random phase.
  And, with `--device-samples` > 0, every node's device sampler: that many `DeviceSample`s
  a node per `sample_interval` (1 s) on the devices stream, one entry per node, as the
  worker's device publisher writes them. These run in a producer process of their own.
- **Ingest lag**: time from a metrics entry's XADD to its acknowledgement by the ingest's
  consumer group (the ingest acknowledges an entry only after its transaction committed,
  so this is write → committed and visible to queries). A thread of the producer polls the
  group every 5 ms (XINFO GROUPS: last delivered id; XPENDING: the oldest unacknowledged);
  an entry counts committed at the first poll where it was delivered and is older than the
  oldest pending one. Resolution: the poll interval.
- **CPU** of the API process (all its threads), of the producer process, of this process
  (the heartbeat generator) and of redis-server, as % of one core over the measured window
  (psutil `cpu_times`, user + system).

Prints one JSON object per node count and a summary table; each round records the load
average (1/5/15 min) at its start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis
from sqlalchemy import update

from backend.auth.service import ensure_admin, issue_token
from backend.config import Settings
from backend.db import POOL_CONNECTIONS, POOL_SIZE, Database
from backend.jobs.models import Attempt, AttemptSlice
from backend.migrate import upgrade
from benchmarks.latency_stats import percentiles
from benchmarks.own_redis import own_redis
from benchmarks.scheduler import scratch_postgres
from benchmarks.spawned import spawned
from benchmarks.telemetry_latency import deployment_keys
from tests.app_settings import ADMIN_TOKEN
from tests.telemetry.helpers import LiveServer, add_attempt
from workers.contract.keys import Keys
from workers.contract.protocol import (
    BATCH_FIELD,
    DEVICES_STREAM,
    INGEST_GROUP,
    METRICS_STREAM,
    DiskSpace,
    Heartbeat,
    HostStats,
    NodeDevice,
    NodeRegistration,
)
from workers.node.settings import WorkerSettings
from workers.telemetry import encode

NAMES = ("loss", "lr", "step_time", "data_time", "compute_time", "optim_time")
DEVICES_PER_NODE = 8
POLL_SECONDS = 0.005
#: the worker's defaults (workers/node/settings.py): what a real node does
HEARTBEAT_INTERVAL = float(WorkerSettings.model_fields["heartbeat_interval"].default)
SAMPLE_INTERVAL = float(WorkerSettings.model_fields["sample_interval"].default)


def stream_id(entry_id: bytes | str) -> tuple[int, int]:
    """A Redis stream id ("ms-seq") as a comparable pair."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def commit_times(
    written: list[tuple[tuple[int, int], float]],
    polls: list[tuple[float, tuple[int, int], tuple[int, int] | None]],
) -> list[float]:
    """Each written entry's lag: the first poll at which it was committed, minus its write time.

    written: (stream id, write time) in id order. polls: (time, last delivered id, oldest
    pending id or None) in time order. An entry is committed at a poll when it was delivered
    (id ≤ last delivered) and is older than the oldest pending entry. Entries never seen
    committed are left out (the caller compares the counts).
    """
    lags: list[float] = []
    index = 0
    for at, delivered, pending in polls:
        while index < len(written):
            entry, wrote = written[index]
            if entry > delivered or (pending is not None and entry >= pending):
                break
            lags.append(max(0.0, at - wrote))
            index += 1
    return lags


@dataclass(frozen=True)
class SimNode:
    name: str
    token: str
    instance: str
    attempts: tuple[int, ...] = ()


def _serve(settings: Settings, pool: int, release: bool, ready: Any, stop: Any) -> None:
    if release:  # an experiment: a request gives its connection back once authenticated
        import backend.auth.deps

        authenticate = backend.auth.deps.authenticate

        def released(session: Any, secret: str) -> Any:
            principal = authenticate(session, secret)
            session.rollback()  # nothing written yet: ends the read, returns the connection
            return principal

        backend.auth.deps.authenticate = released
    if pool:  # an experiment: the API's SQLite engine with a pool of `pool` connections
        import backend.db

        create = backend.db.create_engine

        def sized(url: str, **options: Any) -> Any:
            if str(url).startswith("sqlite"):
                options.update(pool_size=pool, max_overflow=0)
            return create(url, **options)

        backend.db.create_engine = sized  # type: ignore[assignment]
    with LiveServer.running(settings) as server:
        ready.put((server.port, os.getpid()))
        stop.wait()


@contextlib.contextmanager
def control_plane(
    tmp: Path, redis_url: str, pool: int, release: bool = False, postgres: str = ""
) -> Iterator[tuple[int, int, Database]]:
    """One API process (ingest and scheduler in it) on a fresh SQLite, or a fresh database on
    the PostgreSQL server `postgres` names; (port, pid, database).

    pool > 0: its SQLite engine gets a pool of that many connections (no overflow) instead
    of `backend.db.make_engine`'s."""
    with contextlib.ExitStack() as scratch:
        url = (
            scratch.enter_context(scratch_postgres(postgres))
            if postgres
            else f"sqlite:///{tmp / 'control.db'}"
        )
        with _api_process(tmp, url, redis_url, pool, release) as running:
            yield running


@contextlib.contextmanager
def _api_process(
    tmp: Path, url: str, redis_url: str, pool: int, release: bool
) -> Iterator[tuple[int, int, Database]]:
    upgrade(url)
    settings = Settings(
        data_dir=tmp / "data",
        database_url=url,
        redis_url=redis_url,
        admin_token=ADMIN_TOKEN,
        run_scheduler=True,
        run_ingest=True,
        frontend_dir=tmp / "no-frontend",
        allowed_hosts="127.0.0.1",
    )
    with spawned(_serve, settings, pool, release) as (port, pid):
        db = Database(url)
        try:
            yield port, pid, db
        finally:
            db.dispose()


def make_nodes(db: Database, count: int) -> list[SimNode]:
    """count node tokens, each bound to its node (as an operator issues them)."""
    nodes = []
    with db.session() as session:
        admin = ensure_admin(session)
        for i in range(count):
            name = f"sim-{i:04d}"
            _, secret = issue_token(session, user=admin, scopes="node", node=name)
            nodes.append(SimNode(name, secret, uuid.uuid4().hex))
    return nodes


def registration(node: SimNode) -> dict[str, Any]:
    devices = [
        NodeDevice(index=i, kind="gpu", name="NVIDIA H100 80GB HBM3", memory_total=80 << 30)
        for i in range(DEVICES_PER_NODE)
    ]
    body = NodeRegistration(
        name=node.name,
        instance=node.instance,
        hostname=node.name,
        address="127.0.0.1",
        api_host="127.0.0.1",
        devices=devices,
        data_dir=f"/data/{node.name}",
    )
    return body.model_dump(mode="json")


def beat_body(node: SimNode) -> dict[str, Any]:
    beat = Heartbeat(
        instance=node.instance,
        attempts=list(node.attempts),
        deployment_seen=True,
        host=HostStats(
            cpu_percent=random.uniform(5, 60), cpus=96, memory_used=200 << 30, memory_total=1 << 40
        ),
        disk=DiskSpace(free=(2 << 40) - random.randrange(1 << 30), total=4 << 40),
    )
    return beat.model_dump(mode="json")


def place_jobs(db: Database, nodes: list[SimNode], jobs: int) -> list[SimNode]:
    """jobs running jobs, one per node from the first, owned by that node's instance."""
    placed = list(nodes)
    for i in range(min(jobs, len(nodes))):
        node = nodes[i]
        _, attempt_id = add_attempt(db)
        with db.session() as session:
            session.execute(
                update(Attempt)
                .where(Attempt.id == attempt_id)
                .values(node_name=node.name, devices=list(range(DEVICES_PER_NODE)))
            )
            session.add(
                AttemptSlice(
                    attempt_id=attempt_id,
                    node_name=node.name,
                    node_rank=0,
                    devices=list(range(DEVICES_PER_NODE)),
                    state="running",
                    instance=node.instance,
                )
            )
        placed[i] = SimNode(node.name, node.token, node.instance, (attempt_id,))
    return placed


async def register_all(url: str, nodes: list[SimNode]) -> float:
    """Register every node (16 at a time, as a cluster restarting); seconds it took."""
    started = time.perf_counter()
    gate = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one(node: SimNode) -> None:
            async with gate:
                headers = {"Authorization": f"Bearer {node.token}"}
                answer = await client.post(
                    "/api/nodes/register", json=registration(node), headers=headers
                )
                answer.raise_for_status()

        await asyncio.gather(*(one(node) for node in nodes))
    return time.perf_counter() - started


@dataclass
class BeatLog:
    latencies: list[float]
    late: list[float]
    errors: int = 0
    refused: int = 0  # 503 answers (a worker retries these)
    unexpected: int = 0  # replies that said stop or reregister


async def heartbeats(url: str, nodes: list[SimNode], warmup: float, seconds: float) -> BeatLog:
    """Every node beats as the worker's heartbeat thread does: a beat, then HEARTBEAT_INTERVAL
    after it ended, the next (from a random first phase; a 10-s timeout, the worker's). Logs
    the beats sent in the measured window; `late` is how long after its wake-up time the
    node's task ran (the generator's event loop lag)."""
    log = BeatLog([], [])
    limits = httpx.Limits(max_connections=len(nodes), max_keepalive_connections=len(nodes))
    loop = asyncio.get_running_loop()
    start = loop.time()
    measure_from, end = start + warmup, start + warmup + seconds
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as client:

        async def node_loop(node: SimNode) -> None:
            headers = {"Authorization": f"Bearer {node.token}"}
            due = start + random.uniform(0, HEARTBEAT_INTERVAL)
            while due < end:
                await asyncio.sleep(max(0.0, due - loop.time()))
                sent = loop.time()
                measured = measure_from <= sent
                try:
                    answer = await client.post(
                        f"/api/nodes/{node.name}/heartbeat", json=beat_body(node), headers=headers
                    )
                    answer.raise_for_status()
                    reply = answer.json()
                except httpx.HTTPStatusError as err:
                    if err.response.status_code == 503:
                        log.refused += measured
                    else:
                        log.errors += measured
                except httpx.HTTPError:
                    log.errors += measured
                else:
                    if measured:
                        log.latencies.append(loop.time() - sent)
                        log.late.append(sent - due)
                        log.unexpected += bool(reply["stop"] or reply["reregister"])
                due = loop.time() + HEARTBEAT_INTERVAL

        await asyncio.gather(*(node_loop(node) for node in nodes))
    return log


def produce(
    redis_url: str,
    keys: Keys,
    attempts: list[int],
    node_names: list[str],
    args: dict[str, Any],
    ready: Any,
    results: Any,
) -> None:
    """The producer process: the jobs' relays, the nodes' device samplers, the lag poller."""
    client = redis.Redis.from_url(redis_url)
    metrics, devices = keys.stream(METRICS_STREAM), keys.stream(DEVICES_STREAM)
    stop = threading.Event()
    written: list[tuple[tuple[int, int], float]] = []
    polls: list[tuple[float, tuple[int, int], tuple[int, int] | None]] = []
    ranks, steps_per_s = int(args["ranks"]), float(args["steps_per_s"])

    def relays() -> None:
        phase = {a: random.uniform(0, 1 / steps_per_s) for a in attempts}
        step = dict.fromkeys(attempts, 0)
        seq = dict.fromkeys(attempts, 0)
        started = time.time()
        while not stop.is_set():
            now = time.time()
            due = [a for a in attempts if started + phase[a] + step[a] / steps_per_s <= now]
            for attempt in due:
                items = [
                    {"attempt_id": attempt, "rank": rank, "step": step[attempt], "name": name,
                     "value": 1.0 / (step[attempt] + 1) + 0.01 * rank, "time": now}
                    for rank in range(ranks) for name in NAMES
                ]  # fmt: skip
                batch = {"producer": f"sim/attempt-{attempt}", "seq": seq[attempt], "items": items}
                wrote = time.time()
                entry = client.xadd(metrics, {BATCH_FIELD: encode(batch)})
                written.append((stream_id(entry), wrote))
                step[attempt] += 1
                seq[attempt] += 1
            time.sleep(0.002)

    def samplers() -> None:
        per_node = int(args["device_samples"])
        seq = 0
        while per_node and not stop.wait(SAMPLE_INTERVAL):
            now = time.time()
            pipe = client.pipeline(transaction=False)
            for name in node_names:
                items = [
                    {"node": name, "device": d, "kind": "gpu", "time": now,
                     "util": random.uniform(0, 100), "mem_used": 40 << 30, "mem_total": 80 << 30,
                     "temperature": 60.0, "power": 450.0}
                    for d in range(per_node)
                ]  # fmt: skip
                batch = {"producer": f"{name}/devices", "seq": seq, "items": items}
                pipe.xadd(devices, {BATCH_FIELD: encode(batch)})
            pipe.execute()
            seq += 1

    def poller() -> None:
        while not stop.wait(POLL_SECONDS):
            pipe = client.pipeline(transaction=False)
            pipe.xinfo_groups(metrics)
            pipe.xpending(metrics, INGEST_GROUP)
            try:
                groups, pending = pipe.execute()
            except redis.ResponseError:  # the ingest has not made its group yet
                continue
            at = time.time()
            group = next(
                (g for g in groups if g["name"] in (INGEST_GROUP, INGEST_GROUP.encode())), None
            )
            if group is None:
                continue
            oldest = stream_id(pending["min"]) if pending["pending"] else None
            polls.append((at, stream_id(group["last-delivered-id"]), oldest))

    threads = [threading.Thread(target=f, daemon=True) for f in (relays, samplers, poller)]
    for thread in threads:
        thread.start()
    ready.put(True)
    ready_to_stop = results.get()  # the main process says when the window ended
    assert ready_to_stop == "stop"
    time.sleep(2.0)  # let the last entries commit
    stop.set()
    for thread in threads:
        thread.join(10)
    results.put({"written": written, "polls": polls})


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def redis_process(url: str) -> psutil.Process | None:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name().startswith("redis-server") and str(port) in " ".join(child.cmdline()):
                return child
    return None


def run_round(nodes_count: int, args: argparse.Namespace) -> dict[str, Any]:
    load_start = os.getloadavg()
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        control_plane(Path(tmp), redis_url, args.pool, args.release_after_auth, args.postgres) as (
            port,
            pid,
            db,
        ),
    ):
        url = f"http://127.0.0.1:{port}"
        nodes = make_nodes(db, nodes_count)
        registered_s = asyncio.run(register_all(url, nodes))
        nodes = place_jobs(db, nodes, args.jobs)
        attempts = [a for node in nodes for a in node.attempts]
        keys = deployment_keys(db)
        context = mp.get_context("spawn")
        ready, results = context.Queue(), context.Queue()
        options = {
            "ranks": args.ranks,
            "steps_per_s": args.steps_per_s,
            "device_samples": args.device_samples,
        }
        producer = context.Process(
            target=produce,
            args=(redis_url, keys, attempts, [n.name for n in nodes], options, ready, results),
            daemon=True,
        )
        producer.start()
        ready.get(timeout=60)
        api, prod = psutil.Process(pid), psutil.Process(producer.pid)
        server = redis_process(redis_url)
        measured: dict[str, float] = {}

        def mark() -> None:  # the measured window's start: CPU counters of every process
            time.sleep(args.warmup)
            measured.update(
                unix=time.time(), api=cpu_seconds(api), prod=cpu_seconds(prod),
                wall=time.perf_counter(), redis=cpu_seconds(server) if server else 0.0,
            )  # fmt: skip

        marker = threading.Thread(target=mark)
        marker.start()
        gen_cpu = time.process_time()
        log = asyncio.run(heartbeats(url, nodes, args.warmup, args.seconds))
        gen_cpu = time.process_time() - gen_cpu
        marker.join()
        wall = time.perf_counter() - measured["wall"]
        api_cpu = cpu_seconds(api) - measured["api"]
        prod_cpu = cpu_seconds(prod) - measured["prod"]
        redis_cpu = cpu_seconds(server) - measured["redis"] if server else 0.0
        results.put("stop")
        produced = results.get(timeout=120)
        producer.join(15)
        load_end = os.getloadavg()
    # the measured window's entries only (written after the warmup, before the heartbeats ended)
    window = (measured["unix"], measured["unix"] + wall)
    lags = [
        lag
        for (_, wrote), lag in zip(
            produced["written"], commit_times(produced["written"], produced["polls"]), strict=False
        )
        if window[0] <= wrote <= window[1]
    ]
    steps_total = sum(1 for _, wrote in produced["written"] if window[0] <= wrote <= window[1])
    return {
        "nodes": nodes_count,
        "pool": args.pool or f"default ({POOL_SIZE} + {POOL_CONNECTIONS - POOL_SIZE})",
        "release_after_auth": args.release_after_auth,
        "database": "postgresql" if args.postgres else "sqlite",
        "jobs": len(attempts),
        "heartbeats_per_s": len(log.latencies) / args.seconds,
        "heartbeats_expected_per_s": nodes_count / HEARTBEAT_INTERVAL,
        "metric_points_per_s": len(attempts) * args.ranks * len(NAMES) * args.steps_per_s,
        "device_samples_per_s": nodes_count * args.device_samples / SAMPLE_INTERVAL,
        "register_all_s": round(registered_s, 2),
        "heartbeat": percentiles(log.latencies) if log.latencies else {},
        "heartbeat_event_loop_lag": percentiles(log.late) if log.late else {},
        "heartbeat_errors": log.errors,
        "heartbeat_refused_503": log.refused,
        "heartbeat_unexpected_replies": log.unexpected,
        "ingest_lag": percentiles(lags) if lags else {},
        "metric_entries_written": steps_total,
        "metric_entries_committed": len(lags),
        "cpu_percent_of_a_core": {
            "api": 100 * api_cpu / wall,
            "heartbeat_generator": 100 * gen_cpu / (args.warmup + args.seconds),
            "producer": 100 * prod_cpu / wall,
            "redis": 100 * redis_cpu / wall,
        },
        "measured_s": round(wall, 1),
        "load_average_start": load_start,
        "load_average_end": load_end,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="250,500,1000")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--steps-per-s", type=float, default=2.0)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--device-samples", type=int, default=DEVICES_PER_NODE)
    parser.add_argument(
        "--pool", type=int, default=0, help="the API's SQLite pool size (0: the product's)"
    )
    parser.add_argument(
        "--postgres",
        default="",
        metavar="SERVER",
        help="run the API on a scratch database of this PostgreSQL server "
        "(e.g. postgresql+psycopg://postgres@127.0.0.1:5432) instead of SQLite",
    )
    parser.add_argument(
        "--release-after-auth",
        action="store_true",
        help="experiment: the API's requests end their read transaction after authenticating",
    )
    args = parser.parse_args()
    rounds = []
    for count in (int(n) for n in args.nodes.split(",")):
        result = run_round(count, args)
        print(json.dumps(result), flush=True)
        rounds.append(result)
    print(f"\nheartbeat every {HEARTBEAT_INTERVAL} s, {args.jobs} jobs × {args.ranks} ranks × "
          f"{len(NAMES)} names × {args.steps_per_s} steps/s, {args.device_samples} device "
          f"samples/node/{SAMPLE_INTERVAL} s; 2-core VM shared with other sessions")  # fmt: skip
    print("nodes | beats/s | beat p50 / p99 ms | loop lag p99 ms | lag p50 / p99 ms | "
          "API % core | generator % | producer % | redis % | load start → end")  # fmt: skip
    for r in rounds:
        cpu, beat, lag = r["cpu_percent_of_a_core"], r["heartbeat"], r["ingest_lag"]
        late = r["heartbeat_event_loop_lag"]
        print(
            f"{r['nodes']} | {r['heartbeats_per_s']:.0f} | {beat.get('p50_ms', 0):.1f} / "
            f"{beat.get('p99_ms', 0):.1f} | {late.get('p99_ms', 0):.1f} | "
            f"{lag.get('p50_ms', 0):.1f} / {lag.get('p99_ms', 0):.1f} | {cpu['api']:.0f} | "
            f"{cpu['heartbeat_generator']:.0f} | {cpu['producer']:.0f} | {cpu['redis']:.0f} | "
            f"{r['load_average_start'][0]:.2f} → {r['load_average_end'][0]:.2f}"
        )


if __name__ == "__main__":
    main()
