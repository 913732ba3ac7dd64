"""What a browser sees during the acceptance run: the `/api/ws` websocket, and `/metrics`.

`Watcher` is a websocket client in a thread, subscribed to `cluster` and `jobs` like the
frontend's board and cluster pages, that records every device sample as it arrives (with
its arrival time) and every job state the board is told about.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

#: the NVML fields a GPU sample should carry, besides `processes`
GPU_FIELDS = ("util", "mem_used", "mem_total", "temperature", "power")
#: the DCGM-named gauges `/metrics` exports per GPU
DCGM_GAUGES = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
)
CPU_GAUGES = ("trainboard_cpu_slot_util_percent", "trainboard_cpu_slot_rss_bytes")


@dataclass
class Arrival:
    at: float  # time.time() when the message reached this client
    sample: dict[str, Any]


@dataclass
class Watcher:
    """Records the `cluster` and `jobs` topics of one websocket connection."""

    url: str
    token: str
    arrivals: list[Arrival] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    job_states: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    subscribed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acceptance-ws", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self.subscribed.wait(30):
            raise RuntimeError(f"no websocket snapshot within 30 s: {self.errors}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        ws_url = self.url.replace("http://", "ws://", 1) + "/api/ws"
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            with connect(ws_url, additional_headers=headers, proxy=None, max_size=None) as ws:
                for topic in ("cluster", "jobs"):
                    ws.send(json.dumps({"op": "subscribe", "topic": topic}))
                while not self._stop.is_set():
                    try:
                        text = ws.recv(timeout=0.5)
                    except TimeoutError:
                        continue
                    self._take(json.loads(text), time.time())
        except (ConnectionClosed, OSError) as err:
            if not self._stop.is_set():
                self.errors.append(f"websocket closed: {err!r}")
        finally:
            self.subscribed.set()  # never leave start() waiting on a dead connection

    def _take(self, message: dict[str, Any], at: float) -> None:
        kind, topic, data = message.get("type"), message.get("topic"), message.get("data") or {}
        if kind == "error" or kind == "resync":
            self.errors.append(json.dumps(message)[:300])
            return
        if topic == "cluster":
            self.nodes = data.get("nodes", self.nodes)
            if kind == "delta":  # a snapshot's samples come from the database, not live
                self.arrivals += [Arrival(at, s) for s in data.get("samples", ())]
        elif topic == "jobs":
            jobs = data.get("jobs", [data["job"]] if "job" in data else [])
            for job in jobs:
                seen = self.job_states[job["id"]]
                if not seen or seen[-1] != job["state"]:
                    seen.append(job["state"])
            if kind == "snapshot":
                self.subscribed.set()

    def devices(self) -> list[dict[str, Any]]:
        """Every device of every node, as the cluster topic last described them."""
        return [{**d, "node": n["name"]} for n in self.nodes for d in n.get("devices", ())]


def cadence(arrivals: list[Arrival]) -> dict[tuple[str, int], dict[str, float]]:
    """Per device: how many samples arrived, and the median and p95 seconds between arrivals."""
    by_device: dict[tuple[str, int], list[float]] = defaultdict(list)
    seen: set[tuple[str, int, float]] = set()
    for arrival in arrivals:
        s = arrival.sample
        key = (s["node"], s["device"], s["time"])
        if key in seen:  # a replayed delta is not a new sample
            continue
        seen.add(key)
        by_device[(s["node"], s["device"])].append(arrival.at)
    result = {}
    for device, times in by_device.items():
        gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
        if not gaps:
            continue
        p95 = gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))]
        result[device] = {"samples": len(times), "median_s": statistics.median(gaps), "p95_s": p95}
    return result


def metrics_families(url: str, token: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """`GET /metrics` as the admin: gauge name → [(labels, value)]."""
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    response.raise_for_status()
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[sample.name].append((dict(sample.labels), float(sample.value)))
    return found
