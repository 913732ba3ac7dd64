"""Build nothing; serve bench-dist/ and run the chart benchmark in Debian's Chromium.

Usage (from frontend/): npm run bench:build && ../.venv/bin/python bench/run.py
"""

from __future__ import annotations

import functools
import http.server
import json
import platform
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

DIST = Path(__file__).resolve().parents[1] / "bench-dist"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def main() -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(DIST))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"http://127.0.0.1:{server.server_port}/index.html")
            page.wait_for_function("window.__bench !== undefined", timeout=180_000)
            results = page.evaluate("window.__bench")
            browser.close()
    finally:
        server.shutdown()
    results["machine"] = f"{platform.machine()} {platform.processor() or ''}".strip()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
