"""Where a live metric point spends its time: per-hop times, and a loopback baseline.

For `python -m benchmarks.telemetry_latency latency --via relay`. Every time is `time.time()`
on this machine's one clock, taken by the benchmark, none by a new field on the wire:

| hop | taken where |
|---|---|
| report | the rank's `sdk.report` (the point's value carries it, as before) |
| relay | the relay's stamp (the point's `time`): the relay read and parsed the line |
| xadd, xadded | the relay process's publisher, around its XADD (`relay_sink --xadds`) |
| entry | the stream entry id's milliseconds: Redis's clock at the XADD (floored) |
| read | the API's ingest got the entry (its XREADGROUP returned) |
| validated | the round's entries were decoded and validated; its transaction begins |
| committed | the ingest's round was committed |
| published | the delta's `tb:live` entry id (Redis's clock at the MULTI/EXEC that also XACKs
the round; milliseconds, floored) |
| tail | the API's live tail got the delta (its XREAD returned; `Hub.publish_raw`) |
| sent | the hub wrote the delta to the client's transport (`Hub._fanout_raw` returned) |
| received | the measuring client read the websocket frame |

The API-side hops are recorded by wrapping five methods in the API's process only
(`record_api_hops`, called there before the app is built): one `time.time()` and one
list append per ingest round or delta. With the ingest in a process of its own (`--ingest
process`, as `trainboard up` runs it) its three are recorded there, and `merged` joins the
two records. `done` (per round, not a hop of the point) is when
the ingest's `publish` returned: after its MULTI/EXEC, the progress announcement and the
sweeps' progress hook, the ingest reads again. `api_threads`: each of the API's threads'
seconds on a core and seconds runnable but waiting for one (the kernel's schedstat), between
two takes (the loopback baseline and the run): what the machine's other work cost them.
A point is joined to its XADD by (rank, newest step of the rank in each batch), to its
round by its entry id, and to the delta it arrived in by the delta's position (`pos`).

The loopback baseline (`loopback`) is the bare path with none of our batching: a producer
process XADDs one entry a millisecond carrying its time, a server process XREADs the
stream (blocking) and sends each entry on a websocket at once, and a client here reads
it: XADD → XREAD → websocket, on the same Redis and machine, in the same run.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import multiprocessing as mp
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.latency_stats import percentiles
from benchmarks.spawned import spawned

#: the hops, in order, as columns of `PointTimes`
HOPS = (
    "report",
    "relay",
    "xadd",
    "xadded",
    "read",
    "validated",
    "committed",
    "published",
    "tail",
    "sent",
    "received",
)


@dataclass
class ApiHops:
    """What the API process saw: per ingest round (keyed by its newest metric entry id) and
    per live delta (keyed by its position), when each hop happened."""

    read: list[tuple[tuple[int, int], float]] = field(default_factory=list)
    validated: list[tuple[tuple[int, int], float]] = field(default_factory=list)
    committed: list[tuple[tuple[int, int], float]] = field(default_factory=list)
    done: list[tuple[tuple[int, int], float]] = field(default_factory=list)
    tail: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    #: CPU seconds of the API's process (every thread) between two takes
    cpu_s: list[float] = field(default_factory=list)
    #: per thread of the API's process, between two takes: (seconds on a core, seconds
    #: runnable but waiting for one), from the kernel's schedstat
    threads: list[dict[str, tuple[float, float]]] = field(default_factory=list)


class HopsLink:
    """How the benchmark asks the API's process for what it recorded (and clears it)."""

    def __init__(self, context: Any) -> None:
        self._asks, self._answers = context.Queue(), context.Queue()

    def take(self) -> ApiHops:
        """What the API recorded since the last take (ask only once nothing flows)."""
        self._asks.put(None)
        hops: ApiHops = self._answers.get(timeout=120)
        return hops

    def answer_until(self, stop: Any, hops: ApiHops) -> None:
        """In the API's process: answer each take() until stop is set."""
        cpu, scheduled = time.process_time(), thread_times()
        while not stop.is_set():
            with contextlib.suppress(queue.Empty):
                self._asks.get(timeout=0.5)
                hops.cpu_s.append(time.process_time() - cpu)
                hops.threads.append(_since(thread_times(), scheduled))
                self._answers.put(ApiHops(**{k: v.copy() for k, v in vars(hops).items()}))
                for recorded in vars(hops).values():
                    recorded.clear()
                cpu, scheduled = time.process_time(), thread_times()


def merged(api: ApiHops, ingest: ApiHops) -> ApiHops:
    """What the API's process and an ingest process of its own (`trainboard ingest`) recorded,
    as one record: the rounds from the ingest's, the deltas from the API's, the CPU of both,
    the ingest process's threads named `ingest process: <thread>`."""
    threads = [
        {**mine, **{f"ingest process: {name}": times for name, times in theirs.items()}}
        for mine, theirs in zip(api.threads, ingest.threads, strict=True)
    ]
    return ApiHops(
        read=ingest.read,
        validated=ingest.validated,
        committed=ingest.committed,
        done=ingest.done,
        tail=api.tail,
        sent=api.sent,
        cpu_s=[a + b for a, b in zip(api.cpu_s, ingest.cpu_s, strict=True)],
        threads=threads,
    )


def _since(
    now: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    return {
        name: (on_cpu - before.get(name, (0.0, 0.0))[0], waited - before.get(name, (0.0, 0.0))[1])
        for name, (on_cpu, waited) in now.items()
    }


def thread_times() -> dict[str, tuple[float, float]]:
    """Each thread of this process by name (`name#n` for repeats): (seconds it ran on a core,
    seconds it was runnable and waited for one), from /proc/self/task/*/schedstat (Linux
    only; {} elsewhere). The wait is the machine's share of a thread's latency: a thread
    waiting for the GIL or a socket is not runnable and counts in neither."""
    times: dict[str, tuple[float, float]] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
                on_cpu, waited, _ = stat.read().split()
        except (OSError, ValueError):
            continue
        name, repeat = thread.name, 1
        while name in times:
            repeat += 1
            name = f"{thread.name}#{repeat}"
        times[name] = (int(on_cpu) / 1e9, int(waited) / 1e9)
    return times


def _entry_id(value: Any) -> tuple[int, int]:
    text = value.decode() if isinstance(value, bytes) else str(value)
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def record_api_hops() -> ApiHops:
    """Wrap the ingest's read, write and publish and the hub's two fan-out steps to record
    when each round and delta passed; call in the API's process before the app starts."""
    from backend.telemetry.ingest.consumer import Ingest
    from backend.telemetry.live.hub import Hub
    from workers.contract.protocol import METRICS_STREAM

    hops = ApiHops()
    read, write, publish = Ingest.read, Ingest.write, Ingest.publish
    publish_raw, fanout_raw = Hub.publish_raw, Hub._fanout_raw

    def newest_metric(ingest: Ingest, ids: dict[str, list[Any]]) -> tuple[int, int] | None:
        for stream, entry_ids in ids.items():
            if entry_ids and ingest._kinds.get(stream) == METRICS_STREAM:
                return _entry_id(entry_ids[-1])
        return None

    def timed_read(self: Ingest, **kwargs: Any) -> Any:
        entries = read(self, **kwargs)
        now = time.time()
        newest = newest_metric(self, {s: [i for i, _ in m] for s, m in entries.items()})
        if newest is not None:
            hops.read.append((newest, now))
        return entries

    def timed_write(self: Ingest, round_: Any) -> Any:
        began = time.time()
        written = write(self, round_)
        newest = newest_metric(self, round_.ids)
        if newest is not None:
            hops.validated.append((newest, began))
            hops.committed.append((newest, time.time()))
        return written

    def timed_publish(self: Ingest, written: Any) -> int:
        count = publish(self, written)
        newest = newest_metric(self, written.ids)
        if newest is not None:
            hops.done.append((newest, time.time()))
        return count

    def timed_publish_raw(self: Hub, topic: str, position: str, data: str) -> None:
        hops.tail[position] = time.time()
        publish_raw(self, topic, position, data)

    def timed_fanout_raw(self: Hub, topic: str, position: str, data: str) -> None:
        fanout_raw(self, topic, position, data)
        hops.sent[position] = time.time()

    Ingest.read = timed_read  # type: ignore[method-assign]
    Ingest.write = timed_write  # type: ignore[method-assign]
    Ingest.publish = timed_publish  # type: ignore[method-assign]
    Hub.publish_raw = timed_publish_raw  # type: ignore[method-assign]
    Hub._fanout_raw = timed_fanout_raw  # type: ignore[method-assign]
    return hops


@dataclass
class Received:
    """What the measuring client read: per point (rank, step, report time, relay stamp,
    the position of its delta, when the client read it)."""

    rows: list[tuple[int, int, float, float, str, float]] = field(default_factory=list)

    def add(self, message: dict[str, Any], received: float) -> None:
        position = message.get("pos", "")
        for point in message.get("data", {}).get("metrics", []):
            self.rows.append(
                (point["rank"], point["step"], point["value"], point["time"], position, received)
            )

    def delivered(self) -> dict[str, Any]:
        """Distinct (rank, step) points read, and whether each rank's steps came in order."""
        newest: dict[int, int] = {}
        in_order = True
        for rank, step, *_ in self.rows:
            in_order = in_order and step >= newest.get(rank, -1)
            newest[rank] = step
        return {
            "distinct_rank_steps": len({(row[0], row[1]) for row in self.rows}),
            "in_order_per_rank": in_order,
        }


def join(
    received: Received,
    xadds: list[tuple[float, float, str, dict[str, int]]],
    api: ApiHops,
    *,
    warmup: float,
) -> dict[str, Any]:
    """Per-hop percentiles of every point reported `warmup` s after the first."""
    by_rank: dict[int, tuple[list[int], list[int]]] = {}  # rank → (newest steps, batch index)
    for index, (_, _, _, newest) in enumerate(xadds):
        for key, newest_step in newest.items():  # JSON made the ranks strings
            steps, batches = by_rank.setdefault(int(key), ([], []))
            steps.append(newest_step)
            batches.append(index)
    rounds = {
        name: ([key for key, _ in sorted(rows)], [t for _, t in sorted(rows)])
        for name, rows in (
            ("read", api.read),
            ("validated", api.validated),
            ("committed", api.committed),
            ("done", api.done),
        )
    }
    first = min((row[2] for row in received.rows), default=0.0)
    times: list[list[float]] = []
    entries: list[float] = []
    unjoined = 0
    for rank, step, report, relay, position, got in received.rows:
        if report - first < warmup:
            continue
        steps, batches = by_rank.get(rank, ([], []))
        at = bisect.bisect_left(steps, step)
        tail, sent = api.tail.get(position), api.sent.get(position)
        if at == len(steps) or tail is None or sent is None:
            unjoined += 1
            continue
        before, after, entry_text, _ = xadds[batches[at]]
        entry = _entry_id(entry_text)
        row = [report, relay, before, after]
        for name in ("read", "validated", "committed"):
            keys, stamps = rounds[name]
            found = bisect.bisect_left(keys, entry)
            row.append(stamps[found] if found < len(keys) else float("nan"))
        published = _entry_id(position)[0] / 1000
        times.append([*row, published, tail, sent, got])
        entries.append(entry[0] / 1000)
    if not times:
        return {"n": 0, "unjoined": unjoined}
    table = np.array(times)
    complete = ~np.isnan(table).any(axis=1)
    unjoined += int((~complete).sum())
    table, entry_ms = table[complete], np.array(entries)[complete]
    total = table[:, -1] - table[:, 0]
    slowest = total >= np.quantile(total, 0.99)
    hops: dict[str, Any] = {}
    for i in range(1, len(HOPS)):
        spent = table[:, i] - table[:, i - 1]
        hops[f"{HOPS[i - 1]}→{HOPS[i]}"] = {
            **_brief(spent),
            "mean_ms_of_slowest_1pct": float(spent[slowest].mean() * 1000),
        }
    return {
        "n": len(table),
        "unjoined": unjoined,
        "api_cpu_s": sum(api.cpu_s),
        "api_threads": _threads(api.threads),
        "ingest_rounds": _rounds(rounds),
        "hops": hops,
        "since_report": {HOPS[i]: _brief(table[:, i] - table[:, 0]) for i in range(1, len(HOPS))},
        "entry_id_since_report": _brief(entry_ms - table[:, 0]),
        "entry_id_after_xadd_start_ms": float(np.median(entry_ms - table[:, 2]) * 1000),
    }


def _threads(takes: list[dict[str, tuple[float, float]]]) -> dict[str, dict[str, float]]:
    """The API's threads that ran over 0.05 s: seconds on a core and waiting for one."""
    total: dict[str, list[float]] = {}
    for take in takes:
        for name, (on_cpu, waited) in take.items():
            summed = total.setdefault(name, [0.0, 0.0])
            summed[0] += on_cpu
            summed[1] += waited
    return {
        name: {"cpu_s": round(on_cpu, 2), "waited_for_a_core_s": round(waited, 2)}
        for name, (on_cpu, waited) in sorted(total.items(), key=lambda item: -item[1][0])
        if on_cpu > 0.05
    }


def _rounds(rounds: dict[str, tuple[list[tuple[int, int]], list[float]]]) -> dict[str, Any]:
    """How long the ingest's rounds took: validating, writing, and after the commit (the
    MULTI/EXEC and the progress hooks) until it reads again; and how many a second."""
    read, validated, committed, done = (np.array(rounds[k][1]) for k in HOP_ROUNDS)
    if not (len(read) == len(validated) == len(committed) == len(done)) or len(read) < 2:
        return {"rounds": len(read)}
    return {
        "rounds": len(read),
        "per_s": round((len(read) - 1) / (read[-1] - read[0]), 1),
        "validate": _brief(validated - read),
        "write_and_commit": _brief(committed - validated),
        "after_commit": _brief(done - committed),
    }


HOP_ROUNDS = ("read", "validated", "committed", "done")


def _brief(values: np.ndarray) -> dict[str, float]:
    full = percentiles(values.tolist())
    return {k: round(full[k], 2) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")}


STREAM = "bench:loopback"


def _echo_server(redis_url: str, ready: Any, stop: Any) -> None:
    """XREAD the loopback stream and send every entry's payload to each client at once."""
    import redis
    from websockets.sync.server import ServerConnection, serve

    from workers.contract.heap import settle_heap

    def handler(connection: ServerConnection) -> None:
        client = redis.Redis.from_url(redis_url)
        position = "$"
        while not stop.is_set():
            found: Any = client.xread({STREAM: position}, block=200)
            for _stream, entries in found or []:
                for entry_id, fields in entries:
                    position = entry_id
                    connection.send(fields[b"t"].decode())
        client.close()

    with serve(handler, "127.0.0.1", 0) as server:
        settle_heap()
        ready.put(server.socket.getsockname()[1])
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stop.wait()
        server.shutdown()


def _loopback_producer(redis_url: str, rate: float, seconds: float) -> None:
    import redis

    from benchmarks.live_producers import pace

    client = redis.Redis.from_url(redis_url)
    pace(rate, seconds, lambda _: client.xadd(STREAM, {"t": repr(time.time())}, maxlen=10_000))
    client.close()


def loopback(redis_url: str, *, seconds: float, rate: float = 1000.0) -> dict[str, Any]:
    """XADD → XREAD → websocket → client latency of `rate` entries/s for `seconds`."""
    from websockets.sync.client import connect

    latencies: list[float] = []
    with spawned(_echo_server, redis_url) as port, connect(f"ws://127.0.0.1:{port}") as ws:
        time.sleep(0.3)  # the handler's first XREAD is blocking by now
        producer = mp.get_context("spawn").Process(
            target=_loopback_producer, args=(redis_url, rate, seconds)
        )
        producer.start()
        expected, began = int(rate * seconds), time.monotonic()
        while len(latencies) < expected and time.monotonic() - began < seconds + 30:
            with contextlib.suppress(TimeoutError):
                text = ws.recv(timeout=1.0)
                latencies.append(time.time() - float(text))
        producer.join(30)
    counted = latencies[len(latencies) // 10 :]  # the first tenth is warm-up
    if not counted:
        return {"n": 0, "rate": rate}
    return {**_brief(np.array(counted)), "n": len(counted), "rate": rate}


def ratio(result: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float]:
    """result's percentiles over the baseline's."""
    return {
        key: round(result[key] / baseline[key], 1)
        for key in ("p50_ms", "p95_ms", "p99_ms")
        if baseline.get(key)
    }


if __name__ == "__main__":  # the baseline alone: python -m benchmarks.live_hops REDIS_URL
    import sys

    print(json.dumps(loopback(sys.argv[1], seconds=10), indent=1))
