"""Provenance in the browser: two runs of a script from a git checkout, one after a commit
and with uncommitted changes; the job page shows what each ran (the node's record apart
from what the job reported), and compare shows what differs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.helpers import log_in, wait_state
from tests.job_users import reachable
from tests.stack import RunningStack, trainboard_up, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "PATH": "/usr/bin:/bin",
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**GIT_ENV, "HOME": str(repo)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def checkout_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningStack, Path]]:
    """A stack whose script root is a git checkout holding train.py."""
    tmp = tmp_path_factory.mktemp("provenance")
    repo = reachable(tmp / "scripts")
    (repo / "train.py").write_text("print('step 1 loss 1.0', flush=True)\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    subprocess.run(["chmod", "-R", "o+rX", str(repo)], check=True)
    with trainboard_up(tmp, extra_env={"TRAINBOARD_SCRIPT_ROOTS": str(repo)}) as stack:
        yield stack, repo


def _run(stack: RunningStack, name: str) -> int:
    spec = {"name": name, "entrypoint": {"script": "train.py"}, "parallelism": {"devices": 1}}
    with stack.client() as client:
        response = client.post("/api/jobs", json=spec)
    assert response.status_code == 201, response.text
    job_id = int(response.json()["id"])
    wait_state(stack, job_id, "succeeded")
    with stack.client() as client:
        wait_for(
            lambda: client.get(f"/api/jobs/{job_id}/provenance").json()["reported"],
            timeout=60,
            what=f"job {job_id}'s provenance",
        )
    return job_id


def test_provenance_is_shown_and_diffed(
    page: Page, checkout_stack: tuple[RunningStack, Path]
) -> None:
    stack, repo = checkout_stack
    first_commit = _git(repo, "rev-parse", "HEAD")
    first = _run(stack, "before")
    (repo / "train.py").write_text("print('step 1 loss 0.5', flush=True)\n")
    _git(repo, "commit", "-qam", "second")
    second_commit = _git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text("print('step 1 loss 0.25', flush=True)  # uncommitted\n")
    second = _run(stack, "after")

    log_in(page, stack)
    page.goto(f"{stack.url}/jobs/{second}")
    provenance = page.get_by_test_id("job-provenance")
    expect(page.get_by_test_id("prov-script")).to_contain_text("train.py")
    expect(page.get_by_test_id("prov-git")).to_contain_text(second_commit[:12])
    expect(page.get_by_test_id("prov-git")).to_contain_text("uncommitted changes")
    provenance.get_by_text("Diff", exact=True).click()
    expect(provenance.locator("pre.diff")).to_contain_text(
        "+print('step 1 loss 0.25', flush=True)  # uncommitted"
    )
    reported = page.get_by_test_id("prov-reported")
    expect(reported).to_contain_text("As reported by the job")
    expect(page.get_by_test_id("prov-torch")).to_contain_text(torch.__version__)
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header would cover the page otherwise
    page.screenshot(path=str(SCREENSHOTS / "job-provenance.png"), full_page=True)

    page.goto(f"{stack.url}/compare?jobs={first},{second}")
    diff = page.get_by_test_id("provenance-diff")
    commit_row = page.get_by_test_id("prov-diff-recorded.script.git.commit")
    expect(commit_row).to_contain_text(first_commit)
    expect(commit_row).to_contain_text(second_commit)
    expect(page.get_by_test_id("prov-diff-recorded.script.git.dirty")).to_contain_text("true")
    expect(page.get_by_test_id("prov-diff-recorded.script.sha256")).to_be_visible()
    expect(diff).not_to_contain_text("reported.torch")  # the same interpreter both times
    page.evaluate("window.scrollTo(0, 0)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=str(SCREENSHOTS / "compare-provenance.png"), full_page=True)
