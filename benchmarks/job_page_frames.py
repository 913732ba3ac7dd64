"""Frame pacing of a running job's page while the job reports fast (issue #33 item 3).

    python -m benchmarks.job_page_frames [--minutes 30] [--rate 1000] [--ranks 8]
        [--window 3] [--frontend-dir frontend/dist]

The API (uvicorn, SQLite, its in-process ingest and live tail, as `trainboard up` runs it)
in its own process on a redis-server of the run's own, serving the built frontend; a
feeder process that publishes what 8 ranks' relays publish (`StreamPublisher` XADDs on
the deployment's metrics and logs streams, the supervisor relay's path): `--rate` metric
points a second over `--ranks` ranks, spread over the engine's metric names (loss, lr,
step_time, data_time, compute_time, optim_time; one step of every name per rank), and one
stdout line per rank per step. Everything reaches the page through the real ingest, the
live tail and the websocket.

Two Debian Chromium processes at 1280x800, each logged in: one on the running job's page
(`/jobs/N`), one on the same page of a finished job with stored curves of the same shape
(no live job: the static page). Both are open for the whole run, in separate browsers
(separate renderer processes, so the live page's long tasks cannot block the static
page's main thread; both share the machine's cores). A `requestAnimationFrame` counter
and a `PerformanceObserver` for `longtask` are injected into both; every `--window`
seconds the run reads both pages' frames and long tasks of that window. Every minute,
and at the end, the live page's JS heap after a forced collection (CDP
`HeapProfiler.collectGarbage`, then `Runtime.getHeapUsage`).

Prints JSON: per window both pages' frames, the live/static ratio, long tasks per second
and the longest; the median and 10th percentile of the ratio; the heap samples; the
machine and its load average.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import update

from backend.config import Settings
from backend.db import Database
from backend.jobs.models import Job
from backend.migrate import upgrade
from benchmarks.own_redis import own_redis
from benchmarks.telemetry_latency import deployment_keys
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer, add_attempt, insert_points
from workers.contract.keys import Keys
from workers.contract.protocol import LOGS_STREAM, METRICS_STREAM
from workers.telemetry import StreamPublisher

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
FRONTEND = Path(__file__).resolve().parents[1] / "frontend" / "dist"
NAMES = ("loss", "lr", "step_time", "data_time", "compute_time", "optim_time")

# injected before the app's own scripts: frames and long tasks with their page times
PROBE = """
window.__probe = { frames: 0, long: [] };
const tick = () => { window.__probe.frames += 1; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__probe.long.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
"""
READ = (
    "() => ({ frames: window.__probe.frames, now: performance.now(),"
    " long: window.__probe.long.splice(0) })"
)


def _serve(settings: Settings, ready: Any, stop: Any) -> None:
    with LiveServer.running(settings) as server:
        ready.put(server.port)
        stop.wait()


@contextlib.contextmanager
def api_server(tmp: Path, redis_url: str, frontend: Path) -> Iterator[tuple[int, Database]]:
    """The API with its ingest and the built frontend, in its own process; (port, database)."""
    url = f"sqlite:///{tmp / 'frames.db'}"
    upgrade(url)
    settings = Settings(
        data_dir=tmp / "data",
        database_url=url,
        redis_url=redis_url,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        run_ingest=True,
        frontend_dir=frontend,
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


def feed(redis_url: str, keys: Keys, attempt_id: int, rate: float, ranks: int, stop: Any) -> None:
    """Publish like `ranks` relays: every name per rank per step, one log line per rank and step."""
    metrics = StreamPublisher(redis_url, keys.stream(METRICS_STREAM), "bench-relay-metrics")
    logs = StreamPublisher(redis_url, keys.stream(LOGS_STREAM), "bench-relay-logs")
    steps_per_s = rate / (ranks * len(NAMES))
    started = time.perf_counter()
    step = 0
    while not stop.is_set():
        due = int((time.perf_counter() - started) * steps_per_s)
        while step < due:
            now = time.time()
            for rank in range(ranks):
                for name in NAMES:
                    value = 5.0 * 0.999**step + 0.01 * rank if name == "loss" else 0.01 * (rank + 1)
                    metrics.add(
                        {"attempt_id": attempt_id, "rank": rank, "step": step, "name": name,
                         "value": value, "time": now}
                    )  # fmt: skip
                logs.add(
                    {"attempt_id": attempt_id, "rank": rank, "stream": "stdout", "seq": step,
                     "time": now, "line": f"step {step} loss {5.0 * 0.999**step:.4f}"}
                )  # fmt: skip
            step += 1
        time.sleep(0.002)
    metrics.close()
    logs.close()


def static_job(db: Database, ranks: int, steps: int) -> int:
    """A finished job with stored curves of the live job's shape (names, ranks)."""
    job_id, attempt_id = add_attempt(db, state="succeeded")
    with db.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(name="static-page"))
    rows = [
        {"attempt_id": attempt_id, "rank": rank, "step": step, "name": name, "time": 1e9 + step,
         "value": 5.0 * 0.999**step if name == "loss" else 0.01 * (rank + 1)}
        for step in range(steps) for rank in range(ranks) for name in NAMES
    ]  # fmt: skip
    for i in range(0, len(rows), 20_000):
        insert_points(db, rows[i : i + 20_000])
    return job_id


def open_page(pw: Any, url: str) -> tuple[Any, Any, Any]:
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.add_init_script(PROBE)
    page.goto(url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    page.get_by_test_id("nav-board").wait_for()
    return browser, page, page.context.new_cdp_session(page)


def heap_mib(cdp: Any) -> float:
    cdp.send("HeapProfiler.collectGarbage")
    return float(cdp.send("Runtime.getHeapUsage")["usedSize"]) / 2**20


def profile(cdp: Any, seconds: float) -> list[dict[str, Any]]:
    """CPU profile of the page for seconds: the 15 functions with the most self time."""
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 500})
    cdp.send("Profiler.start")
    time.sleep(seconds)
    result = cdp.send("Profiler.stop")["profile"]
    nodes = {n["id"]: n for n in result["nodes"]}
    deltas = dict.fromkeys(nodes, 0.0)
    for sample, delta in zip(result["samples"], result["timeDeltas"], strict=True):
        deltas[sample] += delta / 1000
    by_function: dict[str, float] = {}
    for node_id, ms in deltas.items():
        frame = nodes[node_id]["callFrame"]
        name = frame["functionName"] or "(anonymous)"
        where = f"{name} {Path(frame['url']).name}:{frame['lineNumber']}:{frame['columnNumber']}"
        by_function[where] = by_function.get(where, 0.0) + ms
    top = sorted(by_function.items(), key=lambda kv: -kv[1])[:15]
    return [{"function": f, "self_ms": round(ms)} for f, ms in top]


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "median": statistics.median(ordered),
        "p10": ordered[int(0.1 * (len(ordered) - 1))],
        "min": ordered[0],
        "max": ordered[-1],
    }


def run(
    minutes: float, rate: float, ranks: int, window: float, frontend: Path, profile_s: float
) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(Path(tmp), redis_url, frontend) as (port, db),
        sync_playwright() as pw,
    ):
        url = f"http://127.0.0.1:{port}"
        live_id, attempt_id = add_attempt(db, state="running")
        with db.session() as session:
            session.execute(update(Job).where(Job.id == live_id).values(name="live-page"))
        static_id = static_job(db, ranks, steps=2000)
        context = mp.get_context("spawn")
        stop = context.Event()
        feeder = context.Process(
            target=feed, args=(redis_url, deployment_keys(db), attempt_id, rate, ranks, stop)
        )
        feeder.start()
        pages: dict[str, tuple[Any, Any, Any]] = {}
        try:
            for which, job_id in (("live", live_id), ("static", static_id)):
                browser, page, cdp = open_page(pw, url)
                page.goto(f"{url}/jobs/{job_id}")
                page.get_by_test_id("loss-chart").wait_for()
                pages[which] = (browser, page, cdp)
            time.sleep(window)  # the live page's snapshot and first deltas
            last = {w: pages[w][1].evaluate(READ) for w in pages}
            windows: list[dict[str, Any]] = []
            heap = [{"s": 0.0, "live_mib": heap_mib(pages["live"][2])}]
            began = time.monotonic()
            next_heap = 60.0
            while (elapsed := time.monotonic() - began) < minutes * 60:
                time.sleep(window)
                row: dict[str, Any] = {"s": round(time.monotonic() - began, 1)}
                for which, (_, page, _) in pages.items():
                    now = page.evaluate(READ)
                    seconds = (now["now"] - last[which]["now"]) / 1000
                    frames = now["frames"] - last[which]["frames"]
                    durations = [d for _, d in now["long"]]
                    row[which] = {
                        "frames": round(frames * window / seconds, 1),  # per `window` seconds
                        "long_per_s": round(len(durations) / seconds, 2),
                        "longest_ms": round(max(durations, default=0.0)),
                    }
                    last[which] = now
                row["ratio"] = round(row["live"]["frames"] / max(row["static"]["frames"], 1), 3)
                windows.append(row)
                if elapsed >= next_heap:
                    heap.append({"s": round(elapsed), "live_mib": heap_mib(pages["live"][2])})
                    next_heap += 60
            ended = round(time.monotonic() - began)
            heap.append({"s": ended, "live_mib": heap_mib(pages["live"][2])})
            hot = profile(pages["live"][2], profile_s) if profile_s else []
            drawn = pages["live"][1].get_by_test_id("loss-chart").get_attribute("data-points")
        finally:
            stop.set()
            feeder.join(30)
            for browser, _, _ in pages.values():
                browser.close()
    return {
        "windows": windows,
        "ratio": summary([w["ratio"] for w in windows]),
        "live_frames": summary([w["live"]["frames"] for w in windows]),
        "static_frames": summary([w["static"]["frames"] for w in windows]),
        "live_long_per_s": summary([w["live"]["long_per_s"] for w in windows]),
        "live_longest_ms": max((w["live"]["longest_ms"] for w in windows), default=0),
        "static_long_per_s": summary([w["static"]["long_per_s"] for w in windows]),
        "heap": heap,
        "live_profile_top": hot,
        "loss_points_drawn_at_end": drawn,
        "settings": {"minutes": minutes, "rate": rate, "ranks": ranks, "window_s": window},
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30, help="how long the live page runs")
    parser.add_argument("--rate", type=float, default=1000, help="points/s, all ranks")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--window", type=float, default=3.0, help="seconds per measured window")
    parser.add_argument("--frontend-dir", type=Path, default=FRONTEND, help="the built frontend")
    parser.add_argument("--windows", action="store_true", help="print every window")
    parser.add_argument(
        "--profile", type=float, default=0, help="then CPU-profile the live page for N seconds"
    )
    a = parser.parse_args()
    load_before = os.getloadavg()
    result = run(a.minutes, a.rate, a.ranks, a.window, a.frontend_dir, a.profile)
    result["load_before"] = load_before
    if not a.windows:
        result["windows"] = result["windows"][:3] + result["windows"][-3:]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
