"""Live delivery latency: publish → websocket frame, and fan-out to many `cluster` clients.

    python -m benchmarks.telemetry_latency latency [--rate 10000] [--seconds 20]
    python -m benchmarks.telemetry_latency fanout [--clients 1000] [--seconds 20]

Three processes on one machine: the API (uvicorn, SQLite, its in-process ingest and
live tail, as `TRAINBOARD_RUN_INGEST=true` runs it), a producer process with the real
`StreamPublisher`s, and the measuring websocket client(s). Every item carries its
publish time (`time`, unix seconds, taken when `add()` is called); a client's latency
for an item is its receive time minus that, on the same clock.

latency: one client on `job:<id>`; the producer publishes `--rate` metric points/s.
fanout: `--clients` clients on `cluster`; the producer publishes 8 GPU samples every
second (one node) and 5 jobs × 10 steps/s × 4 metric names; latency per client and
sample. The clients share one asyncio process; they only timestamp the bytes they
receive and parse the frames after the run, so their own work barely counts in.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from backend.config import Settings
from backend.db import Database
from backend.migrate import upgrade
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt, receive, subscribe
from workers.protocol import DEVICES_STREAM, METRICS_STREAM
from workers.telemetry import FLUSH_INTERVAL, StreamPublisher

REDIS = "redis://127.0.0.1:6379/13"
WARMUP_SECONDS = 2.0
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _serve(settings: Settings, ready: Any, stop: Any) -> None:
    with LiveServer.running(settings) as server:
        ready.put(server.port)
        stop.wait()


@contextlib.contextmanager
def api_server(tmp: Path) -> Iterator[tuple[int, Database]]:
    """The API in its own process on a fresh SQLite database; (port, database)."""
    redis.Redis.from_url(REDIS).flushdb()
    url = f"sqlite:///{tmp / 'live.db'}"
    upgrade(url)
    settings = Settings(
        data_dir=tmp / "data",
        database_url=url,
        redis_url=REDIS,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        frontend_dir=tmp / "no-frontend",
        allowed_hosts="127.0.0.1",
    )
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
        redis.Redis.from_url(REDIS).flushdb()


def _pace(rate: float, seconds: float, emit: Any) -> None:
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


def _produce_metrics(attempt_id: int, rate: float, seconds: float, flush: float) -> None:
    publisher = StreamPublisher(REDIS, METRICS_STREAM, "bench-metrics", flush_interval=flush)

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

    _pace(rate, seconds, emit)
    publisher.close()


def _produce_cluster(attempt_ids: list[int], seconds: float) -> None:
    devices = StreamPublisher(REDIS, DEVICES_STREAM, "bench-agent")
    metrics = StreamPublisher(REDIS, METRICS_STREAM, "bench-ranks")
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

    _pace(10, seconds, emit)
    devices.close()
    metrics.close()


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


def bench_latency(rate: float, seconds: float, flush: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, api_server(Path(tmp)) as (port, db):
        job_id, attempt_id = add_attempt(db)
        from websockets.sync.client import connect

        ws = connect(f"ws://127.0.0.1:{port}/api/ws", additional_headers=HEADERS, max_size=None)
        subscribe(ws, f"job:{job_id}")
        assert receive(ws)["type"] == "snapshot"
        producer = mp.get_context("spawn").Process(
            target=_produce_metrics, args=(attempt_id, rate, seconds, flush)
        )
        producer.start()
        latencies: list[float] = []
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
                    first = first or point["time"]
                    if point["time"] - first >= WARMUP_SECONDS:
                        latencies.append(now - point["time"])
        producer.join(30)
        ws.close()
        result = percentiles(latencies)
        result["received"] = received
        result["expected"] = expected
        return result


class RawClient(asyncio.Protocol):
    """A websocket client that splits frames and timestamps them; JSON is parsed after the run.

    1,000 full websocket clients in one Python process would measure their own
    message handling: the last of them reads a delta long after the server sent it.
    """

    def __init__(self) -> None:
        self.frames: list[tuple[float, bytes]] = []
        self.handshake = asyncio.get_running_loop().create_future()
        self.buffer = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.buffer += data
        if not self.handshake.done():
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return
            self.handshake.set_result(head)
            self.buffer = rest
        while len(self.buffer) >= 2:
            opcode, length, offset = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F, 2
            if length == 126:
                length, offset = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                length, offset = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < offset + length:
                return
            payload = self.buffer[offset : offset + length]
            self.buffer = self.buffer[offset + length :]
            if opcode == 0x1:  # text (the server sends each message in one frame)
                self.frames.append((now, payload))
            elif opcode == 0x9:  # ping: answer, or the server closes the connection
                self.transport.write(_masked_frame(0xA, payload))


def _masked_frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    assert len(payload) < 126
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


async def _raw_client(port: int, topic: str) -> RawClient:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(RawClient, "127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    transport.write(
        (
            f"GET /api/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(client.handshake, 60)
    assert head.startswith(b"HTTP/1.1 101"), head
    subscription = json.dumps({"op": "subscribe", "topic": topic}).encode()
    transport.write(_masked_frame(0x1, subscription))
    return client


async def _fanout_clients(port: int, count: int, seconds: float, ready: threading.Event) -> Any:
    clients = [await _raw_client(port, "cluster") for _ in range(count)]
    await asyncio.sleep(2.0)  # every snapshot sent
    ready.set()
    await asyncio.sleep(seconds + 5)
    latencies: list[tuple[float, float]] = []  # (sample time, latency)
    for client in clients:
        for arrived, payload in client.frames:
            message = json.loads(payload)
            for sample in message.get("data", {}).get("samples", []):
                latencies.append((sample["time"], arrived - sample["time"]))
    first = min((t for t, _ in latencies), default=0.0)
    return [lat for t, lat in latencies if t - first >= WARMUP_SECONDS]


def bench_fanout(clients: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, api_server(Path(tmp)) as (port, db):
        attempts = [add_attempt(db)[1] for _ in range(5)]
        ready = threading.Event()
        result: dict[str, Any] = {}

        def start_producer() -> None:
            ready.wait()
            producer = mp.get_context("spawn").Process(
                target=_produce_cluster, args=(attempts, seconds)
            )
            producer.start()
            producer.join(seconds + 60)

        thread = threading.Thread(target=start_producer, daemon=True)
        thread.start()
        connecting = time.perf_counter()
        latencies = asyncio.run(_fanout_clients(port, clients, seconds, ready))
        thread.join(60)
        result = percentiles(latencies) if latencies else {"n": 0}
        result["clients"] = clients
        result["expected"] = clients * 8 * int(seconds - WARMUP_SECONDS)  # about
        result["connect_and_run_s"] = time.perf_counter() - connecting
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["latency", "fanout"])
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--flush-ms", type=float, default=None, help="publisher flush interval (its default)"
    )
    args = parser.parse_args()
    if args.which == "latency":
        flush = args.flush_ms / 1000 if args.flush_ms else FLUSH_INTERVAL
        result = bench_latency(args.rate, args.seconds, flush)
    else:
        result = bench_fanout(args.clients, args.seconds)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
