"""Playwright driving Debian's Chromium (no downloaded browser)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from backend.config import Settings
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

# assertions wait as long as actions (Playwright's default for `expect` is 5 s: too short
# on a 2-core machine whose other tests load both cores; a failing check still fails)
expect.set_options(timeout=30_000)


# module scope, not session: Playwright's sync API keeps an asyncio loop running in the
# main thread while it is open, and later tests that call asyncio.run() would fail
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install chromium)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


@pytest.fixture
def served(tmp_path: Path, sqlite_url: str, redis_url: str) -> Iterator[LiveServer]:
    """The API and the built frontend on a free port, without scheduler or workers."""
    with serving(tmp_path, sqlite_url, redis_url) as server:
        yield server


@contextlib.contextmanager
def serving(
    tmp_path: Path, sqlite_url: str, redis_url: str, **settings: Any
) -> Iterator[LiveServer]:
    """`served`, with other settings (e.g. `executor="slurm"`)."""
    with LiveServer.running(
        Settings(
            data_dir=tmp_path / "data",
            database_url=sqlite_url,
            redis_url=redis_url,
            admin_token=ADMIN_TOKEN,
            run_scheduler=False,
            **settings,
        )
    ) as server:
        yield server
