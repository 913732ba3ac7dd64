"""What the browser tests share: logging in, jobs set up over REST, and waits on their state."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.stack import RunningStack, wait_for

FINISHED = {"succeeded", "failed", "cancelled"}


def log_in(page: Page, stack: RunningStack) -> None:
    """Sign in with the stack's token and land on the board."""
    page.goto(stack.url + "/")
    page.get_by_test_id("login-token").fill(stack.token)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("nav-board")).to_be_visible()


def open_submit(page: Page, *, name: str | None = None, template: str | None = None) -> None:
    """Open the Submit view; name the job and pick its template where given."""
    page.get_by_test_id("nav-submit").click()
    if name is not None:
        page.get_by_test_id("submit-name").fill(name)
    if template is not None:
        page.get_by_test_id("submit-template").select_option(template)


def submitted_job_id(page: Page) -> int:
    """Wait for a submission to land on its job's page; that job's id."""
    expect(page).to_have_url(re.compile(r".*/jobs/\d+$"), timeout=30_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


@contextlib.contextmanager
def running_job_page(
    page: Page, stack: RunningStack, name: str, **job: Any
) -> Iterator[tuple[int, Locator]]:
    """A job of a million steps (`job`: more of submit_job's options) open on its page once
    that reads running: its id and state badge. Cancelled on the way out, whatever the test
    did."""
    job_id = submit_job(stack, name, steps=1_000_000, **job)
    try:
        log_in(page, stack)
        page.goto(f"{stack.url}/jobs/{job_id}")
        state = page.get_by_test_id("job-state")
        expect(state).to_have_attribute("data-state", "running", timeout=120_000)
        yield job_id, state
    finally:
        cancel_quietly(stack, job_id)


def submit_job(
    stack: RunningStack,
    name: str,
    *,
    steps: int,
    devices: int = 1,
    lr: float = 0.01,
    priority: str = "normal",
    checkpoint_every: int | None = 20,
    parallelism: dict[str, Any] | None = None,
    **fields: Any,
) -> int:
    """Submit an mlp job over REST (setup the test is not about) and return its id.

    `parallelism`: more fields of it (an update mode); `fields`: more of the spec's own
    (a straggler)."""
    spec: dict[str, Any] = {
        "name": name,
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": devices, **(parallelism or {})},
        "hyperparameters": {"steps": steps, "batch_size": 32, "lr": lr},
        "priority": priority,
        **fields,
    }
    if checkpoint_every:
        spec["checkpoint"] = {"every_steps": checkpoint_every}
    with stack.client() as client:
        response = client.post("/api/jobs", json=spec)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def get_job(stack: RunningStack, job_id: int) -> dict[str, Any]:
    with stack.client() as client:
        response = client.get(f"/api/jobs/{job_id}")
    response.raise_for_status()
    return dict(response.json())


def wait_state(stack: RunningStack, job_id: int, *states: str, timeout: float = 180) -> dict:
    """Poll the API until the job is in one of states; fail naming the state it was stuck in."""
    seen: dict[str, Any] = {}

    def reached() -> dict | None:
        seen.update(get_job(stack, job_id))
        return dict(seen) if seen["state"] in states else None

    try:
        return dict(wait_for(reached, timeout=timeout, what=f"job {job_id} to be {states}"))
    except AssertionError as err:
        raise AssertionError(f"{err} (last state {seen.get('state')})") from None


def cancel_quietly(stack: RunningStack, *job_ids: int) -> None:
    """Cleanup: cancel jobs that are not finished, so the next test finds free devices."""
    with stack.client() as client:
        for job_id in job_ids:
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"/api/jobs/{job_id}").json()["state"] not in FINISHED:
                    client.post(f"/api/jobs/{job_id}/cancel")
    for job_id in job_ids:
        with contextlib.suppress(AssertionError):
            wait_state(stack, job_id, *FINISHED, "paused", timeout=60)


def count(page: Page, test_id: str, attribute: str = "data-points") -> int:
    """A chart's drawn count (data-points / data-samples), 0 before it draws."""
    return int(page.get_by_test_id(test_id).get_attribute(attribute) or 0)
