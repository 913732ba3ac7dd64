"""A real Trainboard whose data dir (database, runs, checkpoints) is a small tmpfs that fills up."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.full_disk import fill, fill_leaving, small_filesystem
from tests.job_users import reachable
from tests.stack import RunningStack, trainboard_up, wait_for

pytestmark = pytest.mark.slow  # starts `trainboard up`

MIB = 1 << 20
#: an mlp whose checkpoints take about 25.6 MB each
WIDE = {"hidden": 1024}
CHECKPOINT_BYTES = 25_600_000

#: reports a loss through the SDK and prints a line every 0.5 s; at step 10 it waits for
#: the test to fill the disk, at step 30 it says so and waits for space to come back
SDK_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from workers import sdk
    gates = sys.argv[1]
    def wait(name):
        while not os.path.exists(os.path.join(gates, name)):
            time.sleep(0.05)
    for step in range(1, 41):
        if step == 10:
            wait("full")
        if step == 31:
            open(os.path.join(gates, "at-30"), "w").close()
            wait("free")
        sdk.report(step, loss=1.0 / step)
        print(f"step {step}: train loss {1.0 / step:.5f}", flush=True)
        time.sleep(0.5)
    """
)


@pytest.fixture(scope="module")
def full_disk_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """`trainboard up` whose data dir is a 128 MiB tmpfs; scripts and gates live outside it."""
    tmp = reachable(tmp_path_factory.mktemp("full-disk-stack"))
    scripts = reachable(tmp / "scripts")
    (scripts / "sdk_printer.py").write_text(SDK_SCRIPT)
    env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
    with small_filesystem(tmp / "data", size="128M"), trainboard_up(tmp, extra_env=env) as stack:
        yield stack


def api(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    answer = client.request(method, path, **kwargs)
    assert answer.is_success, (method, path, answer.status_code, answer.text)
    return answer.json()


def wait_state(client: httpx.Client, job_id: int, *states: str, timeout: float) -> Any:
    def reached() -> Any:
        job = client.get(f"/api/jobs/{job_id}").json()
        return job if job.get("state") in states else None

    return wait_for(reached, timeout=timeout, what=f"job {job_id} to be {' or '.join(states)}")


def stored_once(stack: RunningStack, job_id: int) -> list[tuple[int, int]]:
    """(step, times stored) of the job's loss points, straight from the database."""
    rows = stack.sql(
        "SELECT m.step, count(*) FROM metric_points m JOIN attempts a"
        " ON a.id = m.attempt_id WHERE a.job_id = :j AND m.name = 'loss'"
        " GROUP BY m.attempt_id, m.step ORDER BY m.step",
        j=job_id,
    )
    return [(int(step), int(count)) for step, count in rows]


def test_a_job_whose_policy_says_pause_pauses_on_a_full_disk_and_resumes_from_its_checkpoint(
    full_disk_stack: RunningStack,
) -> None:
    stack, disk = full_disk_stack, full_disk_stack.data_dir
    spec = {
        "name": "pauses-when-full",
        "template": "mlp",
        "hyperparameters": {"steps": 30, **WIDE},
        "checkpoint": {"every_steps": 10, "on_disk_full": "pause"},
    }
    # room for step-10's checkpoint (and the database's growth), not for step-20's too
    ballast = fill_leaving(disk, CHECKPOINT_BYTES + 16 * MIB)
    with stack.client() as client:
        job_id = api(client, "POST", "/api/jobs", json=spec)["id"]
        paused = wait_state(client, job_id, "paused", "failed", "succeeded", timeout=240)
        (attempt,) = api(client, "GET", f"/api/jobs/{job_id}/attempts")
        events = wait_for(  # the ranks' warning comes through the telemetry ingest
            lambda: (
                (e := api(client, "GET", f"/api/jobs/{job_id}/events"))
                and any(x["kind"] == "warning" for x in e)
                and e
            ),
            timeout=60,
            what="the warning event",
        )
        kinds = [e["kind"] for e in events]
        warnings = [e["message"] for e in events if e["kind"] == "warning"]

        assert paused["state"] == "paused", paused["reason"]
        assert paused["reason"].startswith("no space left on node local (")
        assert " MiB free): checkpoint step 20 not saved;" in paused["reason"], warnings
        assert paused["restarts"] == 0 and "failed" not in kinds and "restarting" not in kinds
        assert (attempt["state"], attempt["exit_reason"]) == ("stopped", paused["reason"])
        assert attempt["last_checkpoint"].endswith("/step-10")
        assert [w for w in warnings if w.startswith("checkpoint step 20 not saved: no space")]
        checkpoints = Path(attempt["last_checkpoint"]).parent
        assert [p.name for p in checkpoints.iterdir()] == ["step-10"]  # no partial folder
        assert "resume" in paused["actions"]

        ballast.unlink()
        api(client, "POST", f"/api/jobs/{job_id}/resume")
        done = wait_state(client, job_id, "succeeded", "failed", "paused", timeout=240)
        first, second = api(client, "GET", f"/api/jobs/{job_id}/attempts")

    assert done["state"] == "succeeded", done["reason"]
    assert done["restarts"] == 0 and done["step"] == 30
    assert second["resume_from"] == first["last_checkpoint"]  # the last good one, step 10
    assert second["last_checkpoint"].endswith("/step-30")
    # attempt 1 stored steps 1..20 (it trained to 20 before the save failed), attempt 2 11..30
    assert stored_once(stack, job_id) == sorted(
        [(s, 1) for s in range(1, 21)] + [(s, 1) for s in range(11, 31)]
    )


def test_a_script_reporting_through_the_sdk_trains_through_a_full_disk_and_stores_every_point(
    full_disk_stack: RunningStack, tmp_path: Path
) -> None:
    stack, disk = full_disk_stack, full_disk_stack.data_dir
    gates = reachable(tmp_path / "gates")
    gates.chmod(0o777)  # the job user leaves its mark there
    spec = {
        "name": "sdk-printer",
        "entrypoint": {"script": "sdk_printer.py", "args": [str(gates)]},
    }
    with stack.client() as client:
        job_id = api(client, "POST", "/api/jobs", json=spec)["id"]
        wait_for(lambda: client.get(f"/api/jobs/{job_id}").json()["step"] >= 9, timeout=180,
                 what="step 9 on the board")  # fmt: skip
        ballast = fill(disk)  # nothing left: the database, logs and all
        (gates / "full").touch()
        wait_for(lambda: (gates / "at-30").exists(), timeout=120, what="the script at step 30")
        ballast.unlink()
        (gates / "free").touch()
        done = wait_state(client, job_id, "succeeded", "failed", "paused", timeout=240)
        (attempt,) = api(client, "GET", f"/api/jobs/{job_id}/attempts")
        wait_for(lambda: len(stored_once(stack, job_id)) >= 40, timeout=60, what="40 points")
        series = api(client, "GET", f"/api/jobs/{job_id}/metrics/loss")

    assert done["state"] == "succeeded", done["reason"]
    assert done["restarts"] == 0 and attempt["state"] == "succeeded"
    assert series["step"] == list(range(1, 41))
    assert series["value"] == [1.0 / s for s in range(1, 41)]
    assert stored_once(stack, job_id) == [(s, 1) for s in range(1, 41)]  # all stored, once
