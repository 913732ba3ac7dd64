"""Build nothing; serve bench-dist/ and run the chart benchmark in Debian's Chromium.

Usage (from frontend/): npm run bench:build && ../.venv/bin/python bench/run.py [--rounds N]
[--other DIR ...] [--first-only] [--query '&idle=500']

After the page's own run, rounds of cold first draws of 150,000 points, each in a fresh page, the
order rotating every round: uPlot handed every point (`?first=raw`) and the app's chart over
the store (`?first=app`), so each round is a same-run ratio. `--other DIR` (another bench
build, e.g. of the code before a change) adds its app first draw to every round: the change's
own same-run ratio; `--other` may be given more than once (other_app, other2_app, …: several
variants in the same rounds). `--first-only` skips the page's own run. `--query` is appended to
every first draw's URL: `&idle=MS` lets the page idle MS ms between filling the store and
mounting the chart (a job page waiting for its snapshot), when the app's idle warm-up of the
chart code runs (components/Chart.tsx: warmUp); its time is reported as `warm_up_ms`.
`--page N` times a job page's first paint of N metric charts instead (`?first=page`: the app's
MetricCharts over N metrics × 8 ranks × 18,750 steps; `app` is the render → the next frame,
`app_all` → every chart drawn), in this build and each `--other`, without `raw`.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import platform
import statistics
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

DIST = Path(__file__).resolve().parents[1] / "bench-dist"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


@contextmanager
def serving(directory: Path) -> Iterator[str]:
    """A static server of `directory`; its index page's URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/index.html"
    finally:
        server.shutdown()


def first_draw(browser: Any, url: str) -> dict[str, Any]:
    """One cold first draw in a page of its own: its ms, and the idle warm-up's before it."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_function("window.__bench !== undefined", timeout=180_000)
    found = page.evaluate("window.__bench")
    page.close()
    out = {"ms": float(found["first_draw_ms"]), "warm_up_ms": sum(found.get("warm_up_ms", []))}
    if "all_ms" in found:
        out["all_ms"] = float(found["all_ms"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6, help="rounds of cold first draws")
    parser.add_argument(
        "--other", type=Path, action="append", default=[], help="another bench build (repeatable)"
    )
    parser.add_argument("--first-only", action="store_true", help="only the first draws")
    parser.add_argument("--query", default="", help="appended to each first draw's URL")
    parser.add_argument("--page", type=int, default=0, help="a job page's N charts' first paint")
    a = parser.parse_args()
    results: dict[str, Any] = {"load_before": os.getloadavg()}
    with served_builds(DIST, a.other) as (url, other_urls), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        if not a.first_only:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_function("window.__bench !== undefined", timeout=180_000)
            results.update(page.evaluate("window.__bench"))
            page.close()
        first = f"?first=page&metrics={a.page}" if a.page else "?first=app"
        kinds = {} if a.page else {"raw": url + "?first=raw" + a.query}
        kinds["app"] = url + first + a.query
        others = [f"other{i + 1 if i else ''}_app" for i in range(len(other_urls))]
        for name, other_url in zip(others, other_urls, strict=True):
            kinds[name] = other_url + first + a.query
        rounds = []
        names = list(kinds)
        for i in range(a.rounds):
            order = names[i % len(names) :] + names[: i % len(names)]
            draws = {which: first_draw(browser, kinds[which]) for which in order}
            found: dict[str, float] = {which: d["ms"] for which, d in draws.items()}
            for which, d in draws.items():
                if d["warm_up_ms"]:
                    found[f"{which}_warm_up"] = round(d["warm_up_ms"], 1)
                if "all_ms" in d:
                    found[f"{which}_all"] = d["all_ms"]
            if "raw" in found:
                found["app/raw"] = round(found["app"] / found["raw"], 3)
            for name in others:
                found[f"app/{name}"] = round(found["app"] / found[name], 3)
                if f"{name}_all" in found:
                    found[f"app_all/{name}_all"] = round(found["app_all"] / found[f"{name}_all"], 3)
            rounds.append(found)
        browser.close()
    results["first_draw_150k_rounds"] = rounds
    keys = dict.fromkeys(key for r in rounds for key in r)
    results["first_draw_150k_median"] = {
        key: round(statistics.median(r[key] for r in rounds if key in r), 3) for key in keys
    }
    results["machine"] = f"{platform.machine()} {os.cpu_count()} cores"
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


@contextmanager
def served_builds(first: Path, others: list[Path]) -> Iterator[tuple[str, list[str]]]:
    """Serve one build and any others."""
    with ExitStack() as stack:
        url = stack.enter_context(serving(first))
        yield url, [stack.enter_context(serving(other)) for other in others]


if __name__ == "__main__":
    main()
