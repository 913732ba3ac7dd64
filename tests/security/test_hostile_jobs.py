"""The attacks of issue #30, each as an ordinary user's job or request, against a real stack of
each shape: the default `trainboard up` (a private Redis on a unix socket) and `up` on a TCP
Redis that requires a password. Each asserts the refusal a user would see.

The Redis probe itself (every address of the deployment's Redis, both shapes) is
tests/security/test_redis_exposure.py; the directory-swap race against the real API is
tests/security/test_checkpoint_race.py (in-process, hundreds of rounds); uid leases across
deployments are tests/security/test_job_uids.py. This module runs, on both stack shapes, the
attacks that need a running deployment: daemons that outlive their job, a run dir filled
past its quota, a webhook aimed at the host itself, a sweep grid that would not fit in
memory, a flood of bad logins from the host's loopback, and reaching another user's job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.job_users import reachable
from tests.security.test_orphans import HOSTILE_RANK, daemonize_through_the_api
from tests.security.test_rank_confinement import finished, ordinary_user
from tests.security.test_redis_exposure import STACKS
from tests.security.test_run_dir_quota import FILLER
from tests.stack import RunningStack, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="ranks switch to the job user only as root"),
]

QUOTA = 32 << 20


@pytest.fixture(scope="module", params=list(STACKS))
def hostile_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningStack, httpx.Client]]:
    """A stack of one shape with the hostile scripts under its script root, and mallory."""
    tmp = tmp_path_factory.mktemp(f"hostile-{request.param}")
    scripts = reachable(tmp / "scripts")
    for name, text in (("daemonize.py", HOSTILE_RANK), ("fill.py", FILLER)):
        (scripts / name).write_text(text)
        os.chmod(scripts / name, 0o644)
    env = {
        "TRAINBOARD_SCRIPT_ROOTS": str(scripts),
        "TRAINBOARD_RUN_DIR_QUOTA_BYTES": str(QUOTA),
        "TRAINBOARD_RUN_DIR_QUOTA_INTERVAL": "0.5",
    }
    with STACKS[request.param](tmp, env) as stack, ordinary_user(stack) as mallory:
        yield stack, mallory


def test_daemons_of_a_job_end_with_it(hostile_stack: tuple[RunningStack, httpx.Client]) -> None:
    stack, mallory = hostile_stack
    for mode, ending in (("exit", "succeeded"), ("wait", "cancelled")):
        daemonize_through_the_api(stack, mallory, mode=mode, ending=ending)


def test_a_job_filling_its_run_dir_is_stopped_at_the_quota_with_the_reason(
    hostile_stack: tuple[RunningStack, httpx.Client],
) -> None:
    _, mallory = hostile_stack
    spec = {"name": "filler", "entrypoint": {"script": "fill.py"}, "max_restarts": 0}
    created = mallory.post("/api/jobs", json=spec)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    job = wait_for(lambda: finished(mallory, job_id), timeout=120, what="the filler to end")
    assert job["state"] == "failed", job
    reasons = str(mallory.get(f"/api/jobs/{job_id}/attempts").json())
    assert "run dir over quota" in reasons and "32.0 MiB" in reasons, reasons


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "[::1]", "169.254.169.254"]
)
def test_a_webhook_at_the_host_itself_is_refused(
    hostile_stack: tuple[RunningStack, httpx.Client], host: str
) -> None:
    stack, mallory = hostile_stack
    port = stack.url.rsplit(":", 1)[1]
    refused = mallory.post("/api/webhooks", json={"url": f"http://{host}:{port}/api/jobs"})
    assert refused.status_code == 422, refused.text
    assert mallory.get("/api/webhooks").json() == []


def test_a_sweep_grid_that_would_not_fit_in_memory_is_refused_at_once(
    hostile_stack: tuple[RunningStack, httpx.Client],
) -> None:
    _, mallory = hostile_stack
    values = {"values": [float(i + 1) / 1000 for i in range(32)]}
    body: dict[str, Any] = {
        "name": "huge",
        "base": {"name": "b", "template": "mlp", "hyperparameters": {"steps": 5}},
        "method": "grid",
        "parameters": {
            f"hyperparameters.{name}": values
            for name in ("lr", "weight_decay", "momentum", "beta1", "beta2", "eps")
        },
    }
    started = time.monotonic()
    refused = mallory.post("/api/sweeps", json=body)
    assert refused.status_code == 422, refused.text
    assert time.monotonic() - started < 5  # counted, not built (it exhausted memory before)
    assert mallory.get("/api/sweeps").json() == {"sweeps": []}


def test_bad_logins_from_the_hosts_loopback_do_not_lock_out_a_valid_token(
    hostile_stack: tuple[RunningStack, httpx.Client],
) -> None:
    stack, _ = hostile_stack
    with httpx.Client(base_url=stack.url, timeout=30) as anyone:
        codes = [
            anyone.post("/api/login", json={"token": f"tb_wrong-{i}"}).status_code
            for i in range(15)
        ]
        assert 429 in codes and set(codes) <= {401, 429}  # the flood is limited
        assert anyone.post("/api/login", json={"token": stack.token}).status_code == 200


def test_another_users_job_is_out_of_reach(
    hostile_stack: tuple[RunningStack, httpx.Client],
) -> None:
    stack, mallory = hostile_stack
    with stack.client() as admin:
        victim = admin.post(
            "/api/jobs", json={"name": "admins", "template": "mlp", "hyperparameters": {"steps": 5}}
        ).json()["id"]
        for path in ("", "/checkpoints", "/logs", "/logs.txt", "/attempts"):
            assert mallory.get(f"/api/jobs/{victim}{path}").status_code == 404, path
        for action in ("cancel", "pause"):
            assert mallory.post(f"/api/jobs/{victim}/{action}").status_code == 404, action
        job = wait_for(lambda: finished(admin, victim), timeout=120, what="admin's job")
        assert job["state"] == "succeeded"
