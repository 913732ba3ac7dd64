"""Live delivery latency: publish → websocket frame, and fan-out to many `cluster` clients.

    python -m benchmarks.telemetry_latency latency [--rate 10000] [--seconds 20]
    python -m benchmarks.telemetry_latency fanout [--clients 1000] [--seconds 20]
        [--deflate] [--eager]

Three processes on one machine: the API (uvicorn, SQLite, its in-process ingest and
live tail, as `TRAINBOARD_RUN_INGEST=true` runs it), a producer process with the real
`StreamPublisher`s, and the measuring websocket client(s); and a redis-server of the
run's own on a free port (`redis-server` must be on PATH). Every item carries its
publish time (`time`, unix seconds, taken when `add()` is called); a client's latency
for an item is its receive time minus that, on the same clock.

latency: one client on `job:<id>`; the producer publishes `--rate` metric points/s.
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
import base64
import contextlib
import json
import multiprocessing as mp
import os
import select
import socket
import statistics
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend.config import Settings
from backend.db import Database
from backend.migrate import upgrade
from benchmarks.own_redis import own_redis
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt, receive, subscribe
from workers.protocol import DEVICES_STREAM, METRICS_STREAM
from workers.telemetry import FLUSH_INTERVAL, StreamPublisher

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
    settings = Settings(
        data_dir=tmp / "data",
        database_url=url,
        redis_url=redis_url,
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


def _produce_metrics(
    redis_url: str, attempt_id: int, rate: float, seconds: float, flush: float
) -> None:
    publisher = StreamPublisher(redis_url, METRICS_STREAM, "bench-metrics", flush_interval=flush)

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


def _produce_cluster(redis_url: str, attempt_ids: list[int], seconds: float) -> None:
    devices = StreamPublisher(redis_url, DEVICES_STREAM, "bench-agent")
    metrics = StreamPublisher(redis_url, METRICS_STREAM, "bench-ranks")
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
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(Path(tmp), redis_url) as (port, db),
    ):
        job_id, attempt_id = add_attempt(db)
        from websockets.sync.client import connect

        ws = connect(f"ws://127.0.0.1:{port}/api/ws", additional_headers=HEADERS, max_size=None)
        subscribe(ws, f"job:{job_id}")
        assert receive(ws)["type"] == "snapshot"
        producer = mp.get_context("spawn").Process(
            target=_produce_metrics, args=(redis_url, attempt_id, rate, seconds, flush)
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


#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS); Python's socket module does not name it
SO_TIMESTAMPNS = 35


class RawClient:
    """A websocket client on a raw socket that splits frames and timestamps them.

    1,000 full websocket clients in one Python process would measure their own
    message handling: the last of them reads a delta long after the server sent it.
    So each frame keeps two times: when the client read it, and when its bytes
    arrived at the client's socket (the kernel's receive timestamp: on loopback,
    when the server's write went through). JSON is parsed, and compressed frames
    inflated, after the run.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: (arrived, read, compressed, payload)
        self.frames: list[tuple[float, float, bool, bytes]] = []
        #: text frames the kernel gave no timestamp for: they count as arrived when read
        self.unstamped = 0
        #: text frames read together with a later frame: they carry its (later) arrival time
        self.shared = 0
        self.handshake = asyncio.get_running_loop().create_future()
        self.buffer = b""

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 20, 64)
        except BlockingIOError:
            return
        read = time.time()
        if not data:
            asyncio.get_running_loop().remove_reader(self.sock)
            return
        arrived, stamped = read, False
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                arrived, stamped = seconds + nanoseconds / 1e9, True
        self.buffer += data
        if not self.handshake.done():
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return
            self.handshake.set_result(head)
            self.buffer = rest
        texts = frames = 0
        last_is_text = False
        while len(self.buffer) >= 2:
            opcode, length, offset = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F, 2
            if length == 126:
                length, offset = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                length, offset = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < offset + length:
                break
            frames += 1
            last_is_text = opcode == 0x1
            payload = self.buffer[offset : offset + length]
            compressed = bool(self.buffer[0] & 0x40)  # RSV1: permessage-deflate
            self.buffer = self.buffer[offset + length :]
            if opcode == 0x1:  # text (the server sends each message in one frame)
                self.frames.append((arrived, read, compressed, payload))
                self.unstamped += not stamped
                texts += 1
            elif opcode == 0x9:  # ping: answer, or the server closes the connection
                self.sock.send(_masked_frame(0xA, payload))
        if frames > 1:  # the kernel stamps a read with the arrival of its last bytes
            self.shared += texts - last_is_text

    def messages(self) -> Iterator[tuple[float, float, dict[str, Any]]]:
        """(arrived, read, message) of every text frame, inflated where compressed."""
        inflater = zlib.decompressobj(wbits=-15)  # one per connection: context takeover or not
        for arrived, read, compressed, payload in self.frames:
            if compressed:
                payload = inflater.decompress(payload + b"\x00\x00\xff\xff")
            yield arrived, read, json.loads(payload)


def _masked_frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    assert len(payload) < 126
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


async def _raw_client(port: int, topic: str, *, deflate: bool) -> RawClient:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    client = RawClient(sock)
    loop.add_reader(sock, client.readable)
    key = base64.b64encode(os.urandom(16)).decode()
    offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    sock.send(
        (
            f"GET /api/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n{offer if deflate else ''}"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(client.handshake, 60)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert (b"permessage-deflate" in head.lower()) == deflate, head
    subscription = json.dumps({"op": "subscribe", "topic": topic}).encode()
    sock.send(_masked_frame(0x1, subscription))
    return client


class Bursts:
    """Reads every client once per delivery burst, a while after the burst began.

    A client that reads each frame as it arrives wakes up 1,000 times per delta and
    competes for the server's cores while the server is still sending; remote
    browsers would not. Reading later loses nothing: each frame keeps its kernel
    arrival time (a socket that got two deltas before it was read reports the
    later arrival for both, so that errs on the slow side).
    """

    def __init__(self, clients: list[RawClient], delay: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.delay = delay
        self.poller = select.epoll()
        self.clients = {client.sock.fileno(): client for client in clients}
        for fd in self.clients:
            self.loop.remove_reader(fd)
            self.poller.register(fd, select.EPOLLIN)
        self.loop.add_reader(self.poller.fileno(), self.began)

    def began(self) -> None:
        self.loop.remove_reader(self.poller.fileno())
        self.loop.call_later(self.delay, self.drain)

    def drain(self) -> None:
        for fd, _ in self.poller.poll(0):
            self.clients[fd].readable()
        self.loop.add_reader(self.poller.fileno(), self.began)

    def close(self) -> None:
        self.loop.remove_reader(self.poller.fileno())
        self.poller.close()


async def _fanout_clients(
    port: int, count: int, seconds: float, ready: threading.Event, *, deflate: bool, eager: bool
) -> tuple[list[float], list[float], dict[str, int]]:
    """Latencies of every sample at every client after the warm-up (arrived, read); caveats."""
    clients = [await _raw_client(port, "cluster", deflate=deflate) for _ in range(count)]
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
                target=_produce_cluster, args=(redis_url, attempts, seconds)
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
        "--flush-ms", type=float, default=None, help="publisher flush interval (its default)"
    )
    args = parser.parse_args()
    result: dict[str, Any]
    if args.which == "latency":
        flush = args.flush_ms / 1000 if args.flush_ms else FLUSH_INTERVAL
        result = bench_latency(args.rate, args.seconds, flush)
    else:
        result = bench_fanout(args.clients, args.seconds, deflate=args.deflate, eager=args.eager)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
