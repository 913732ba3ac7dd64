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

Each window also has the CPU each page's browser used (all its processes, a share of one
core: CDP `SystemInfo.getProcessInfo`), which the machine's load disturbs far less than the
frame counts. `--profile-file` keeps the whole CPU profile (DevTools opens it); `--trace N`
then traces each page for N seconds and gives its renderer's main-thread time by trace
event (self time: script, paint, layout, commit...) and each renderer thread's busy time.

`--baseline-dir DIR` compares two builds on the same live job in the same minutes: a third
Chromium opens the live job's page with the app's files (every request outside /api) served
by Playwright from DIR, the measured live page from `--frontend-dir` (or frontend/dist) the
same way, so both builds take the same websocket traffic under the same load. Each window
then also has the baseline page's frames, CPU, their ratio to the static page's frames, and
`ab`: the measured build's frames over the baseline's.
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
from urllib.parse import urlsplit

from tests.job_users import reachable
from tests.stack import RunningStack, trainboard_up, wait_for

CHROMIUM = "/usr/bin/chromium"
#: what `trainboard up` serves unless TRAINBOARD_FRONTEND_DIR says otherwise
DIST = Path(__file__).resolve().parents[1] / "frontend" / "dist"
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


def profile(cdp: Any, seconds: float, save: Path | None = None) -> list[dict[str, Any]]:
    """CPU profile of the page for seconds: the 15 functions with the most self time.

    `save`: the whole profile written there too (a .cpuprofile DevTools opens).
    """
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 500})
    cdp.send("Profiler.start")
    time.sleep(seconds)
    result = cdp.send("Profiler.stop")["profile"]
    if save is not None:
        save.write_text(json.dumps(result))
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


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "cc"]


def trace(browser: Any, page: Any, seconds: float) -> dict[str, Any]:
    """A Chromium trace of the page for seconds: where its renderer's time went.

    On the renderer's main thread each trace event's self time (its span less the spans nested
    in it: script, style, layout, paint, commit...), and each thread of the renderer process
    busy, ms per second.
    """
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    time.sleep(seconds)
    events = json.loads(browser.stop_tracing())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    spans: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            spans.setdefault((e["pid"], e["tid"]), []).append(
                (e["ts"], e["ts"] + e["dur"], e["name"])
            )

    def busy(found: list[tuple[float, float, str]]) -> float:
        total, until = 0.0, -1.0
        for a, b, _ in sorted(found):
            if b > until:
                total += b - max(a, until)
                until = b
        return total

    # the renderer whose main thread ran the most: the page's
    main = [k for k, name in names.items() if name == "CrRendererMain" and k in spans]
    if not main:
        return {}
    page_main = max(main, key=lambda k: busy(spans[k]))
    own: dict[str, float] = {}
    stack: list[list[Any]] = []  # [end, name, time of its children]

    def close(entry: list[Any], span: float) -> None:
        own[entry[1]] = own.get(entry[1], 0.0) + span - entry[2]

    for a, b, name in sorted(spans[page_main], key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][0] <= a:
            done = stack.pop()
            close(done, done[3])
        if stack:
            stack[-1][2] += min(b, stack[-1][0]) - a
        stack.append([b, name, 0.0, b - a])
    for done in stack:
        close(done, done[3])
    threads: dict[str, float] = {}
    for key, found in spans.items():
        if key[0] == page_main[0]:
            label = names.get(key, str(key[1]))
            threads[label] = threads.get(label, 0.0) + busy(found)

    def per_s(values: dict[str, float], top: int) -> dict[str, float]:
        ordered = sorted(values.items(), key=lambda kv: -kv[1])[:top]
        return {k: round(v / 1000 / seconds, 1) for k, v in ordered}

    return {
        "seconds": seconds,
        "main_thread_self_ms_per_s": per_s(own, 20),
        "renderer_threads_busy_ms_per_s": per_s(threads, 8),
    }


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


def is_app_file(url: str) -> bool:
    """Whether a request is for the app's files (not the API): what `--baseline-dir` serves."""
    return not urlsplit(url).path.startswith("/api/")


def serve_from(directory: Path) -> Any:
    """A Playwright route handler: the app's files from `directory` (a build)."""
    root = directory.resolve()

    def handle(route: Any) -> None:
        file = (root / urlsplit(route.request.url).path.lstrip("/")).resolve()
        if not file.is_relative_to(root) or not file.is_file():
            file = root / "index.html"  # the app's own routes, as the API serves them
        route.fulfill(path=str(file))

    return handle


@contextlib.contextmanager
def browser_page(
    pw: Any, stack: RunningStack, path: str, frontend: Path | None = None
) -> Iterator[tuple[Any, Any, Any]]:
    """A logged-in Chromium of its own on `path`, with the frame probe.

    (page, the page's CDP session, the browser's CDP session).

    `frontend`: the app's files from that build instead of the stack's.
    """
    # a page whose files Playwright serves has no address of its own to Chromium, which then
    # refuses its websocket to 127.0.0.1 (net::ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS)
    local = ["--disable-features=LocalNetworkAccessChecks"] if frontend is not None else []
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS + local)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.add_init_script(PROBE)
        if frontend is not None:  # only the app's files: the API's requests go straight through
            page.route(is_app_file, serve_from(frontend))
        page.goto(stack.url + "/")
        page.get_by_test_id("login-token").fill(stack.token)
        page.get_by_test_id("login-submit").click()
        page.get_by_test_id("nav-board").wait_for()
        page.goto(stack.url + path)
        page.get_by_test_id("loss-chart").wait_for()
        yield page, page.context.new_cdp_session(page), browser.new_browser_cdp_session()
    finally:
        browser.close()


def cpu_seconds(browser_cdp: Any) -> float:
    """CPU time used so far by one Chromium, all its processes (browser, renderer, GPU...)."""
    found = browser_cdp.send("SystemInfo.getProcessInfo")["processInfo"]
    return float(sum(p["cpuTime"] for p in found))


def heaps(pages: dict[str, tuple[Any, Any, Any]], seconds: float) -> dict[str, float]:
    """Each live page's heap after a forced collection."""
    found: dict[str, float] = {"s": round(seconds)}
    for which, (_, cdp, _) in pages.items():
        if which != "static":
            found[f"{which}_mib"] = heap_mib(cdp)
    return found


def measure(
    pages: dict[str, tuple[Any, Any, Any]], minutes: float, window: float
) -> dict[str, Any]:
    """Frames, long tasks and CPU of every page per window; the live pages' heap every minute."""
    last = {w: page.evaluate(READ) for w, (page, _, _) in pages.items()}
    cpu = {w: cpu_seconds(b) for w, (_, _, b) in pages.items()}
    windows: list[dict[str, Any]] = []
    heap = [heaps(pages, 0)]
    began = time.monotonic()
    next_heap = 60.0
    while (elapsed := time.monotonic() - began) < minutes * 60:
        time.sleep(window)
        row: dict[str, Any] = {"s": round(time.monotonic() - began, 1)}
        for which, (page, _, browser_cdp) in pages.items():
            now = page.evaluate(READ)
            used = cpu_seconds(browser_cdp)
            seconds = (now["now"] - last[which]["now"]) / 1000
            durations = [d for _, d in now["long"]]
            row[which] = {
                "frames": round((now["frames"] - last[which]["frames"]) * window / seconds, 1),
                "long_per_s": round(len(durations) / seconds, 2),
                "longest_ms": round(max(durations, default=0.0)),
                # the share of a core the whole browser used (every process), per second
                "cpu": round((used - cpu[which]) / seconds, 3),
            }
            last[which] = now
            cpu[which] = used
        row["ratio"] = round(row["live"]["frames"] / max(row["static"]["frames"], 1), 3)
        if "baseline" in row:
            row["baseline_ratio"] = round(
                row["baseline"]["frames"] / max(row["static"]["frames"], 1), 3
            )
            row["ab"] = round(row["live"]["frames"] / max(row["baseline"]["frames"], 1), 3)
        # the machine's 1-minute load: on a shared machine the live page's share of the cores
        # shrinks as other work queues up, and its ratio with it (the static page barely works)
        row["load1"] = round(os.getloadavg()[0], 2)
        windows.append(row)
        if elapsed >= next_heap:
            heap.append(heaps(pages, elapsed))
            next_heap += 60
    heap.append(heaps(pages, time.monotonic() - began))
    return {"windows": windows, "heap": heap}


def per_minute(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each minute's median ratios (live, baseline build, A/B) beside the median 1-minute load."""
    minutes: dict[int, list[dict[str, Any]]] = {}
    for w in windows:
        minutes.setdefault(int(w["s"] // 60), []).append(w)
    found = []
    for m, rows in sorted(minutes.items()):
        entry: dict[str, Any] = {"minute": m + 1}
        for key in ("ratio", "baseline_ratio", "ab"):
            if key in rows[0]:
                entry[key] = round(statistics.median(w[key] for w in rows), 3)
        entry["load1"] = round(statistics.median(w["load1"] for w in rows), 1)
        found.append(entry)
    return found


def run(
    minutes: float,
    rate: float,
    ranks: int,
    window: float,
    profile_s: float = 0,
    frontend: Path | None = None,
    baseline: Path | None = None,
    profile_file: Path | None = None,
    trace_s: float = 0,
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
            # comparing two builds, both live pages get their files the same way
            measured_dir = (frontend or DIST) if baseline is not None else None
            with contextlib.ExitStack() as opened:
                pages = {
                    "live": opened.enter_context(
                        browser_page(pw, stack, f"/jobs/{live_id}", frontend=measured_dir)
                    ),
                    "static": opened.enter_context(browser_page(pw, stack, f"/jobs/{static_id}")),
                }
                if baseline is not None:  # the other build on the same live job
                    pages["baseline"] = opened.enter_context(
                        browser_page(pw, stack, f"/jobs/{live_id}", frontend=baseline)
                    )
                live = pages["live"]
                time.sleep(window)  # the live page's snapshot and first deltas
                measured = measure(pages, minutes, window)
                drawn = live[0].get_by_test_id("loss-chart").get_attribute("data-points")
                hot = profile(live[1], profile_s, profile_file) if profile_s else []
                traced = {
                    which: trace(page.context.browser, page, trace_s)
                    for which, (page, _, _) in pages.items()
                    if trace_s
                }
            live_job = job(stack, live_id)
            with stack.client() as client:
                client.post(f"/api/jobs/{live_id}/cancel")
                stack.wait_job(client, live_id, "cancelled", "succeeded", "failed", timeout=120)
    windows = measured["windows"]
    compared: dict[str, Any] = {}
    if baseline is not None:
        compared = {
            "baseline_dir": str(baseline),
            "baseline_ratio": summary([w["baseline_ratio"] for w in windows]),
            "baseline_frames": summary([w["baseline"]["frames"] for w in windows]),
            "baseline_long_per_s": summary([w["baseline"]["long_per_s"] for w in windows]),
            "baseline_longest_ms": max((w["baseline"]["longest_ms"] for w in windows), default=0),
            "baseline_cpu": summary([w["baseline"]["cpu"] for w in windows]),
            "ab": summary([w["ab"] for w in windows]),
        }
    return {
        "windows": windows,
        "ratio": summary([w["ratio"] for w in windows]),
        "live_frames": summary([w["live"]["frames"] for w in windows]),
        "static_frames": summary([w["static"]["frames"] for w in windows]),
        "windows_at_least_0.9": f"{sum(w['ratio'] >= 0.9 for w in windows)} of {len(windows)}",
        "per_minute": per_minute(windows),
        "live_long_per_s": summary([w["live"]["long_per_s"] for w in windows]),
        "live_cpu": summary([w["live"]["cpu"] for w in windows]),
        "static_cpu": summary([w["static"]["cpu"] for w in windows]),
        "live_longest_ms": max((w["live"]["longest_ms"] for w in windows), default=0),
        "static_long_per_s": summary([w["static"]["long_per_s"] for w in windows]),
        **compared,
        "heap": measured["heap"],
        "live_profile_top": hot,
        "trace": traced,
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
    parser.add_argument(
        "--baseline-dir",
        type=Path,
        default=None,
        help="a second build opened on the same live job, compared window by window",
    )
    parser.add_argument(
        "--profile-file", type=Path, default=None, help="where to write the whole CPU profile"
    )
    parser.add_argument(
        "--trace", type=float, default=0, help="then trace each page for N seconds (Chromium)"
    )
    a = parser.parse_args()
    load_before = os.getloadavg()
    result = run(
        a.minutes,
        a.rate,
        a.ranks,
        a.window,
        a.profile,
        a.frontend_dir,
        a.baseline_dir,
        a.profile_file,
        a.trace,
    )
    result["load_before"] = load_before
    if not a.windows:
        result["windows"] = result["windows"][:3] + result["windows"][-3:]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
