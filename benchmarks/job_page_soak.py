"""The job page left open on a real running job for a long while (issue #33 item 3).

    python -m benchmarks.job_page_soak [--minutes 30] [--rate 1000] [--ranks 8] [--window 3]

Everything here is the real stack (an earlier `benchmarks.job_page_frames` fed the page from a
process publishing what relays publish, every rank the same steps in one message: it read
1.00 while the real page was janky, and is gone): `trainboard up` (API, scheduler, ingest, live
tail, a worker node with `--ranks` CPU slots) on a private Redis and its own SQLite, and a
real job submitted through the API: a script entrypoint on `--ranks` ranks, each reporting
through the SDK (`sdk.report`, the supervisor's relay, the ingest) six metrics a step and
printing one log line a step, paced so that all ranks together report `--rate` points a
second, for the whole measured span and a margin.

The static page, the baseline: a finished job of the same script (run to its end first, in
the same stack), its page open in a second browser for the whole run, so that both pages
share the machine's load minute by minute (the ratio live/static is what compares, not the
absolute frame counts of a machine shared with other work).

Two Debian Chromium processes (`--headless --no-sandbox --disable-gpu
--disable-background-networking`), 1280x800, logged in. A `requestAnimationFrame` counter
and a `PerformanceObserver('longtask')` are injected into both; every `--window` seconds
both pages' frames and long tasks of that window are read; every minute and at the end the
live page's JS heap after a forced collection (CDP). Prints JSON: per window both pages'
frames, their ratio, long tasks per second and the longest, the machine's 1-minute load;
summaries, and each minute's median ratio beside its median load; the heap samples;
the machine, its load average before and after, the live job's step; with `--profile N`
the live page's top functions by self time over N seconds after the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.job_users import reachable
from tests.stack import RunningStack, trainboard_up, wait_for

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
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

#: one rank: `per_s` points a second (six names a step) for `seconds`, a log line a step
REPORTER = textwrap.dedent(
    """
    import os, sys, time
    from workers import sdk
    per_s, seconds = float(sys.argv[1]), float(sys.argv[2])
    rank = int(os.environ.get("RANK", "0"))
    steps_per_s = per_s / 6
    began = time.monotonic()
    step = 0
    while (elapsed := time.monotonic() - began) < seconds:
        due = int(elapsed * steps_per_s)
        while step < due:
            loss = 5.0 * 0.9995 ** step + 0.01 * rank
            sdk.report(step, loss=loss, lr=0.01, step_time=0.05, data_time=0.01,
                       compute_time=0.03, optim_time=0.01)
            print(f"step {step} loss {loss:.4f}", flush=True)
            step += 1
        time.sleep(0.01)
    """
)


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


def submit(stack: RunningStack, name: str, ranks: int, per_rank: float, seconds: float) -> int:
    """A script job on `ranks` ranks reporting `per_rank` points a second each; its id."""
    spec = {
        "name": name,
        "entrypoint": {"script": "reporter.py", "args": [str(per_rank), str(seconds)]},
        "parallelism": {"devices": ranks},
        "max_restarts": 0,
    }
    with stack.client() as client:
        answer = client.post("/api/jobs", json=spec)
        assert answer.status_code in (200, 201), answer.text
        return int(answer.json()["id"])


def job(stack: RunningStack, job_id: int) -> dict[str, Any]:
    with stack.client() as client:
        found: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
        return found


@contextlib.contextmanager
def browser_page(pw: Any, stack: RunningStack, path: str) -> Iterator[tuple[Any, Any]]:
    """A logged-in Chromium of its own on `path`, with the frame probe; (page, CDP session)."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.add_init_script(PROBE)
        page.goto(stack.url + "/")
        page.get_by_test_id("login-token").fill(stack.token)
        page.get_by_test_id("login-submit").click()
        page.get_by_test_id("nav-board").wait_for()
        page.goto(stack.url + path)
        page.get_by_test_id("loss-chart").wait_for()
        yield page, page.context.new_cdp_session(page)
    finally:
        browser.close()


def measure(pages: dict[str, tuple[Any, Any]], minutes: float, window: float) -> dict[str, Any]:
    """Frames and long tasks of both pages per window; the live page's heap every minute."""
    last = {w: page.evaluate(READ) for w, (page, _) in pages.items()}
    windows: list[dict[str, Any]] = []
    heap = [{"s": 0.0, "live_mib": heap_mib(pages["live"][1])}]
    began = time.monotonic()
    next_heap = 60.0
    while (elapsed := time.monotonic() - began) < minutes * 60:
        time.sleep(window)
        row: dict[str, Any] = {"s": round(time.monotonic() - began, 1)}
        for which, (page, _) in pages.items():
            now = page.evaluate(READ)
            seconds = (now["now"] - last[which]["now"]) / 1000
            durations = [d for _, d in now["long"]]
            row[which] = {
                "frames": round((now["frames"] - last[which]["frames"]) * window / seconds, 1),
                "long_per_s": round(len(durations) / seconds, 2),
                "longest_ms": round(max(durations, default=0.0)),
            }
            last[which] = now
        row["ratio"] = round(row["live"]["frames"] / max(row["static"]["frames"], 1), 3)
        # the machine's 1-minute load: on a shared machine the live page's share of the cores
        # shrinks as other work queues up, and its ratio with it (the static page barely works)
        row["load1"] = round(os.getloadavg()[0], 2)
        windows.append(row)
        if elapsed >= next_heap:
            heap.append({"s": round(elapsed), "live_mib": heap_mib(pages["live"][1])})
            next_heap += 60
    heap.append({"s": round(time.monotonic() - began), "live_mib": heap_mib(pages["live"][1])})
    return {"windows": windows, "heap": heap}


def per_minute(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each minute's median ratio beside the machine's median 1-minute load in it."""
    minutes: dict[int, list[dict[str, Any]]] = {}
    for w in windows:
        minutes.setdefault(int(w["s"] // 60), []).append(w)
    return [
        {
            "minute": m + 1,
            "ratio": round(statistics.median(w["ratio"] for w in rows), 3),
            "load1": round(statistics.median(w["load1"] for w in rows), 1),
        }
        for m, rows in sorted(minutes.items())
    ]


def run(
    minutes: float,
    rate: float,
    ranks: int,
    window: float,
    profile_s: float = 0,
    frontend: Path | None = None,
) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    per_rank = rate / ranks
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = reachable(Path(tmp_name))
        scripts = reachable(tmp / "scripts")
        (scripts / "reporter.py").write_text(REPORTER)
        env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
        if frontend is not None:  # a `vite build --outDir` of the code measured
            env["TRAINBOARD_FRONTEND_DIR"] = str(frontend.resolve())
        with trainboard_up(tmp, cpu_slots=ranks, extra_env=env) as stack, sync_playwright() as pw:
            static_id = submit(stack, "static-page", ranks, per_rank, seconds=20)
            with stack.client() as client:
                stack.wait_job(client, static_id, "succeeded", "failed", timeout=300)
            # the live job runs through the whole measurement and a margin after it
            live_id = submit(stack, "live-page", ranks, per_rank, seconds=minutes * 60 + 180)
            wait_for(lambda: job(stack, live_id)["step"] >= 20, timeout=300, what="live steps")
            with (
                browser_page(pw, stack, f"/jobs/{live_id}") as live,
                browser_page(pw, stack, f"/jobs/{static_id}") as static,
            ):
                time.sleep(window)  # the live page's snapshot and first deltas
                measured = measure({"live": live, "static": static}, minutes, window)
                drawn = live[0].get_by_test_id("loss-chart").get_attribute("data-points")
                hot = profile(live[1], profile_s) if profile_s else []
            live_job = job(stack, live_id)
            with stack.client() as client:
                client.post(f"/api/jobs/{live_id}/cancel")
                stack.wait_job(client, live_id, "cancelled", "succeeded", "failed", timeout=120)
    windows = measured["windows"]
    return {
        "windows": windows,
        "ratio": summary([w["ratio"] for w in windows]),
        "live_frames": summary([w["live"]["frames"] for w in windows]),
        "static_frames": summary([w["static"]["frames"] for w in windows]),
        "windows_at_least_0.9": f"{sum(w['ratio'] >= 0.9 for w in windows)} of {len(windows)}",
        "per_minute": per_minute(windows),
        "live_long_per_s": summary([w["live"]["long_per_s"] for w in windows]),
        "live_longest_ms": max((w["live"]["longest_ms"] for w in windows), default=0),
        "static_long_per_s": summary([w["static"]["long_per_s"] for w in windows]),
        "heap": measured["heap"],
        "live_profile_top": hot,
        "live_job": {"state": live_job["state"], "step": live_job["step"], "ranks": ranks},
        "loss_points_drawn_at_end": drawn,
        "settings": {"minutes": minutes, "rate": rate, "ranks": ranks, "window_s": window},
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30, help="how long both pages are read")
    parser.add_argument("--rate", type=float, default=1000, help="points/s, all ranks together")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--window", type=float, default=3.0, help="seconds per measured window")
    parser.add_argument("--windows", action="store_true", help="print every window")
    parser.add_argument(
        "--profile", type=float, default=0, help="then CPU-profile the live page for N seconds"
    )
    parser.add_argument(
        "--frontend-dir", type=Path, default=None, help="the built frontend (default frontend/dist)"
    )
    a = parser.parse_args()
    load_before = os.getloadavg()
    result = run(a.minutes, a.rate, a.ranks, a.window, a.profile, a.frontend_dir)
    result["load_before"] = load_before
    if not a.windows:
        result["windows"] = result["windows"][:3] + result["windows"][-3:]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
