"""Job uids are unique on a host across deployments, and never one another user runs as.

Two Trainboards on one host both have a job 1; with `uid = base + job id` both ran as one
uid and the second read and wrote the first's checkpoints. Uids now come from a registry
every deployment on the host shares (workers/supervisor/uid_leases.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

from tests.job_users import open_scratch
from tests.security.script_jobs import script_order, script_settings
from workers.contract import run_layout
from workers.supervisor import uid_leases
from workers.supervisor.attempt import Supervisor
from workers.supervisor.job_user import Isolation
from workers.supervisor.uid_leases import UidRegistry

BASE = 1_900_000_000
HIGHEST = 2**31 - 2


def registry(directory: Path) -> UidRegistry:
    return UidRegistry(directory, BASE, HIGHEST)


def test_two_deployments_asking_for_job_1_get_different_uids(tmp_path: Path) -> None:
    shared = tmp_path / "uids"  # the host-wide registry both deployments use
    first_dir, second_dir = tmp_path / "a" / "runs" / "job-1", tmp_path / "b" / "runs" / "job-1"
    first = registry(shared).uid_for("deployment-a", 1, job_dir=first_dir)
    second = registry(shared).uid_for("deployment-b", 1, job_dir=second_dir)
    assert first != second
    assert BASE < first <= HIGHEST and BASE < second <= HIGHEST
    # every later attempt of the same job gets its uid back (its files stay its own)
    assert registry(shared).uid_for("deployment-a", 1, job_dir=first_dir) == first
    assert registry(shared).uid_for("deployment-b", 1, job_dir=second_dir) == second
    assert registry(shared).holder(first) == uid_leases.Lease("deployment-a", 1, str(first_dir))
    assert os.stat(shared).st_mode & 0o777 == 0o700


def test_isolation_without_a_deployment_id_tells_data_dirs_apart(tmp_path: Path) -> None:
    isolation = Isolation(
        account="trainboard-job", gid=1, account_uid=2, uid_base=BASE, uid_registry=tmp_path / "u"
    )
    one = isolation.identity(1, data_dir=tmp_path / "one").uid
    other = isolation.identity(1, data_dir=tmp_path / "other").uid
    assert one is not None and other is not None and one != other
    assert isolation.identity(1, data_dir=tmp_path / "one").uid == one
    assert isolation.identity(1, deployment="d", data_dir=tmp_path / "one").uid not in (one, other)


def test_a_uid_in_passwd_is_never_handed_out(tmp_path: Path) -> None:
    taken = pwd.getpwnam("nobody").pw_uid
    near_nobody = UidRegistry(tmp_path / "uids", taken - 1, HIGHEST)
    assert near_nobody.uid_for("d", 1, job_dir=tmp_path / "job-1") != taken


@pytest.mark.slow  # a process of another user
@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another uid needs root")
def test_a_uid_with_a_live_process_of_another_user_is_skipped(tmp_path: Path) -> None:
    squatter = subprocess.Popen(["sleep", "60"], user=BASE + 1, group=BASE + 1)
    try:
        deadline = time.monotonic() + 5
        while uid_leases._uids_running().isdisjoint({BASE + 1}):  # noqa: SLF001
            assert time.monotonic() < deadline, "the squatter never ran as its uid"
            time.sleep(0.02)
        uid = registry(tmp_path / "uids").uid_for("d", 1, job_dir=tmp_path / "job-1")
        assert uid != BASE + 1
    finally:
        squatter.kill()
        squatter.wait()


def test_a_lease_lasts_while_its_jobs_files_do(tmp_path: Path) -> None:
    uids = registry(tmp_path / "uids")
    job_dir = tmp_path / "runs" / "job-1"
    job_dir.mkdir(parents=True)
    held = uids.uid_for("old", 1, job_dir=job_dir)
    old = time.time() - 2 * uid_leases.FRESH_SECONDS
    os.utime(tmp_path / "uids" / f"uid-{held}", (old, old))
    # its files are there: another deployment's job 1 must not get that uid
    assert uids.uid_for("new", 1, job_dir=tmp_path / "new" / "job-1") != held
    # a lease just taken counts even before its job's directory exists
    fresh = uids.uid_for("fresh", 2, job_dir=tmp_path / "not-yet")
    assert uids.uid_for("next", 2, job_dir=tmp_path / "next" / "job-2") != fresh
    # the job's files are gone and nothing runs as it: the uid is free again
    job_dir.rmdir()
    assert uids.uid_for("later", 1, job_dir=tmp_path / "later" / "job-1") == held
    assert uids.holder(held) == uid_leases.Lease("later", 1, str(tmp_path / "later" / "job-1"))


def test_the_registry_refuses_a_directory_others_can_read(tmp_path: Path) -> None:
    loose = tmp_path / "uids"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    with pytest.raises(PermissionError, match="mode 0700"):
        registry(loose).uid_for("d", 1, job_dir=tmp_path / "job-1")


SNOOP = """
import os, sys
victim = sys.argv[1]
try:
    print("read", open(os.path.join(victim, "weights.bin")).read(), flush=True)
except OSError as err:
    print("read refused", type(err).__name__, flush=True)
try:
    with open(os.path.join(victim, "planted"), "w") as out:
        out.write("x")
    print("write done", flush=True)
except OSError as err:
    print("write refused", type(err).__name__, flush=True)
open("weights.bin", "w").write("secret of " + os.environ.get("TB_WHO", "?"))
"""


@pytest.mark.slow  # two deployments' real rank processes
@pytest.mark.skipif(os.geteuid() != 0, reason="ranks switch to the job user only as root")
def test_job_1_of_a_second_deployment_cannot_touch_job_1_of_the_first(redis_url: str) -> None:
    with open_scratch("tb-uids-") as scratch:
        two_deployments_one_job_id(scratch, redis_url)


def two_deployments_one_job_id(tmp_path: Path, redis_url: str) -> None:
    """Job 1 of deployment "first" writes weights; job 1 of "second" tries to read them."""
    outputs = []
    victim_run = None
    for deployment in ("first", "second"):
        settings = script_settings(
            tmp_path,
            redis_url,
            {"snoop.py": SNOOP},
            data_dir=tmp_path / deployment,
            uid_registry=tmp_path / "host-uids",  # the registry every deployment here shares
        )
        target = victim_run or (tmp_path / "nothing-yet")
        order = script_order(
            1, "snoop.py", str(target), deployment=deployment, env={"TB_WHO": deployment}
        )
        supervisor = Supervisor(order, settings)
        outcome = supervisor.run()
        assert outcome.outcome == "succeeded", outcome.reason
        log = run_layout.log_dir(settings.data_dir, 1, 1) / "rank-0.stdout.log"
        outputs.append((supervisor.identity.uid, log.read_text()))
        victim_run = supervisor.run_dir
    (first_uid, _), (second_uid, snooped) = outputs
    assert first_uid != second_uid
    assert "read refused PermissionError" in snooped and "secret of first" not in snooped
    assert "write refused PermissionError" in snooped
    assert not (tmp_path / "first" / "runs" / "job-1" / "attempt-1" / "planted").exists()
