"""The Usage view: allocated against busy device-hours per user per day, chart, table, CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest
from playwright.sync_api import Page, expect

from backend.auth.models import User
from tests.backend.test_usage_api import add_samples, ended_attempt
from tests.e2e.conftest import SCREENSHOTS
from tests.telemetry.helpers import ADMIN_TOKEN, LiveServer

pytestmark = pytest.mark.browser


def test_the_usage_view_shows_allocated_against_busy_per_user_and_day(
    page: Page, served: LiveServer
) -> None:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday, before = today - timedelta(days=1), today - timedelta(days=2)
    with served.db.session() as session:
        session.add(User(username="alice", role="user"))
        session.flush()
        # alice: 2 devices for 2 hours yesterday at 50 % (4 allocated, 2 busy device-hours)
        start = yesterday + timedelta(hours=10)
        alices = ended_attempt(
            session, "alice", node="n1", devices=[0, 1], start=start, end=start + timedelta(hours=2)
        )
        add_samples(
            session, alices, start=start, minutes=range(0, 120, 5), util=lambda device, m: 50.0
        )
        # the admin: 1 device for 3 hours two days ago, no samples (busy unknown: 0)
        start = before + timedelta(hours=1)
        ended_attempt(
            session, "admin", node="n2", devices=[0], start=start, end=start + timedelta(hours=3)
        )
        session.commit()

    page.goto(served.url + "/")
    page.get_by_test_id("login-token").fill(ADMIN_TOKEN)
    page.get_by_test_id("login-submit").click()
    page.get_by_test_id("nav-usage").click()

    day, earlier = yesterday.date().isoformat(), before.date().isoformat()
    row = page.get_by_test_id(f"usage-{day}-alice")
    expect(row.locator("td")).to_have_text([day, "alice", "4.00", "2.00", "50 %"])
    other = page.get_by_test_id(f"usage-{earlier}-admin")
    expect(other.locator("td")).to_have_text([earlier, "admin", "3.00", "0.00", "0 %"])
    expect(page.get_by_test_id("usage-total-allocated")).to_have_text("7.00")
    expect(page.get_by_test_id("usage-chart")).to_have_attribute("data-days", "14")
    csv = unquote(page.get_by_test_id("usage-csv").get_attribute("href") or "")
    assert csv.splitlines()[1:] == [
        f"{day},alice,4.0000,2.0000,50.0",
        f"{earlier},admin,3.0000,0.0000,0.0",
    ]
    page.screenshot(path=str(SCREENSHOTS / "usage.png"), full_page=True)

    # one user's days: the chart and the table follow the choice
    page.get_by_test_id("usage-user").select_option("alice")
    expect(page.get_by_test_id(f"usage-{earlier}-admin")).to_have_count(0)
    expect(page.get_by_test_id("usage-total-allocated")).to_have_text("4.00")
    expect(page.get_by_text("allocated vs busy (alice)")).to_be_visible()
    page.get_by_test_id("usage-user").select_option("")

    # a range without them: the chart stays, the table says so
    page.get_by_test_id("usage-to").fill(before.date().isoformat())
    page.get_by_test_id("usage-from").fill((before - timedelta(days=3)).date().isoformat())
    expect(page.get_by_test_id(f"usage-{earlier}-admin")).to_be_visible()
    expect(page.get_by_test_id(f"usage-{day}-alice")).to_have_count(0)
