"""A rank that double-forks and calls setsid leaves nothing running after its attempt.

The hostile rank starts a daemon in a session of its own (the classic double fork), which
ignores SIGTERM, holds 96 MiB and spins; the rank then succeeds, or waits to be cancelled.
No process of the attempt may outlive it by more than the stop grace + 5 s, and while the
daemon lives the attempt's CPU slot accounts for its memory. Real supervisor, real
processes, a real Redis; as root the ranks run as the job's own uid.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import redis

from tests.job_users import open_scratch, reachable
from tests.security.script_jobs import script_order, script_settings
from tests.security.test_rank_confinement import finished, ordinary_user
from tests.stack import EMBEDDED_REDIS, RunningStack, trainboard_up
from workers.contract.keys import Keys
from workers.contract.protocol import AttemptOrder, AttemptOutcome
from workers.devices.host import HostProbe
from workers.devices.registry import DeviceRegistry
from workers.node import provenance
from workers.supervisor import containment
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # real rank processes and their daemons

GRACE = 3.0
DAEMON_BYTES = 96 << 20
HOSTILE_RANK = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    ballast = bytearray(DAEMON_BYTES)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    with open("daemon.pid.partial", "w") as out:
        out.write(str(os.getpid()))
    os.rename("daemon.pid.partial", "daemon.pid")
    while True:
        time.sleep(0.05)
os.waitpid(pid, 0)
while not os.path.exists("daemon.pid"):
    time.sleep(0.05)
print("daemon started", flush=True)
while not os.path.exists("release"):  # the test has sampled the accounting
    time.sleep(0.05)
if sys.argv[1] == "wait":
    while True:
        time.sleep(1)
""".replace("DAEMON_BYTES", str(DAEMON_BYTES))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A scratch directory the job user can reach, whatever other pytest sessions do."""
    with open_scratch("tb-orphans-") as directory:
        yield directory


@pytest.fixture
def hostile_settings(open_tmp: Path, redis_url: str) -> SupervisorSettings:
    """Supervisor settings whose one script root holds the hostile rank."""
    return script_settings(
        open_tmp, redis_url, {"daemonize.py": HOSTILE_RANK}, stop_grace_seconds=GRACE
    )


def order(job_id: int, mode: str) -> AttemptOrder:
    return script_order(job_id, "daemonize.py", mode)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def processes_of_uid(uid: int) -> list[int]:
    """Live processes whose real or effective uid is uid."""
    found = []
    for process in psutil.process_iter(["uids", "status"]):
        uids = process.info["uids"]
        if uids and uid in (uids.real, uids.effective) and process.info["status"] != "zombie":
            found.append(process.pid)
    return found


def run_hostile(
    settings: SupervisorSettings, redis_url: str, *, job_id: int, cancel: bool
) -> tuple[AttemptOutcome, int, float, Supervisor]:
    """Run the hostile attempt; return its outcome, the daemon's pid, when it ended, itself."""
    registry = DeviceRegistry()
    probe = HostProbe(1, registry)
    supervisor = Supervisor(
        order(job_id, "wait" if cancel else "exit"), settings, registry=registry
    )
    outcomes: list[AttemptOutcome] = []
    ended: list[float] = []

    def supervise() -> None:
        outcomes.append(supervisor.run())
        ended.append(time.monotonic())

    thread = threading.Thread(target=supervise)
    thread.start()
    pid_file = supervisor.run_dir / "daemon.pid"
    daemon = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60, "the daemon"))
    assert alive(daemon)
    # the attempt's accounting sees the daemon's memory while it lives
    probe.sample("test-node", time.time())
    time.sleep(0.3)
    (slot,) = probe.sample("test-node", time.time())
    daemon_rss = psutil.Process(daemon).memory_info().rss
    assert daemon_rss >= DAEMON_BYTES * 0.9
    assert slot.mem_used >= daemon_rss, (slot.mem_used, daemon_rss)
    (supervisor.run_dir / "release").touch()
    if cancel:
        redis.Redis.from_url(redis_url).set(
            Keys(supervisor.order.deployment).control(supervisor.order.attempt_id), "cancel"
        )
    thread.join(timeout=60)
    (outcome,) = outcomes
    return outcome, daemon, ended[0], supervisor


@pytest.fixture(params=["cgroup", "uid"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each attempt in a cgroup v2 of its own, or (a host without one) by its job's uid."""
    if request.param == "cgroup" and containment.cgroup2_mount() is None:
        pytest.skip("this host has no cgroup v2 hierarchy")
    if request.param == "uid":
        if os.geteuid() != 0:
            pytest.skip("jobs have uids of their own only when the worker runs as root")
        monkeypatch.setattr(containment, "_make_cgroup", lambda name: (None, None))
    return str(request.param)


@pytest.mark.parametrize("cancel", [False, True], ids=["succeeds", "cancelled"])
def test_a_daemonized_process_ends_with_its_attempt(
    hostile_settings: SupervisorSettings, redis_url: str, cancel: bool, mechanism: str
) -> None:
    outcome, daemon, ended, supervisor = run_hostile(
        hostile_settings, redis_url, job_id=7 if cancel else 6, cancel=cancel
    )
    try:
        assert supervisor.containment.mechanism.startswith(mechanism)
        assert outcome.outcome == ("stopped" if cancel else "succeeded"), outcome.reason
        deadline = GRACE + 5.0 - (time.monotonic() - ended)
        wait_for(lambda: not alive(daemon), max(deadline, 0.1), "the daemon to be gone")
        uid = supervisor.identity.uid
        if uid is not None:  # the job's own uid: nothing of it is left on this host
            assert processes_of_uid(uid) == []
        cgroup = supervisor.containment.cgroup
        assert cgroup is None or not cgroup.exists()  # the attempt's cgroup went with it
    finally:
        if alive(daemon):  # the old code leaves it: do not leave it to the next test
            psutil.Process(daemon).kill()


SITECUSTOMIZE = """
import os, sys, time
if os.environ.get("TB_PROVENANCE_MODE") != "off":
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open(os.path.join(DROP, str(os.getpid())), "w") as out:
            out.write("daemon")
        while True:
            time.sleep(0.05)
    os.waitpid(pid, 0)
    while not os.listdir(DROP):
        time.sleep(0.02)
    if os.environ.get("TB_PROVENANCE_HANG"):
        time.sleep(3600)
"""


@pytest.mark.parametrize("hang", [False, True], ids=["returns", "hangs"])
def test_the_provenance_step_runs_contained_and_time_limited(
    hostile_settings: SupervisorSettings,
    open_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    mechanism: str,
    hang: bool,
) -> None:
    """Script-root code the interpreter report runs (a sitecustomize.py) cannot outlive it."""
    drop = reachable(open_tmp / "drop")
    os.chmod(drop, 0o1777)
    (root,) = hostile_settings.script_roots
    code = SITECUSTOMIZE.replace("DROP", repr(str(drop)))
    if hang:
        code = code.replace('os.environ.get("TB_PROVENANCE_HANG")', "True")
    (root / "sitecustomize.py").write_text(code)
    os.chmod(root / "sitecustomize.py", 0o644)
    if hang:
        monkeypatch.setattr(provenance, "STEP_SECONDS", 3)
    attempt = order(8, "exit")
    identity = hostile_settings.isolation.identity(8, data_dir=hostile_settings.data_dir)
    contained = containment.Containment.create(
        "a801", identity, exclusive_uid=hostile_settings.isolation.per_job
    )
    try:
        started = time.monotonic()
        step = contained.child("provenance")  # as send_provenance runs it
        sent = provenance.collect(attempt, hostile_settings, "test-node", step)
        step.end()
        took = time.monotonic() - started
        daemons = [int(name) for name in os.listdir(drop)]
        assert daemons, ("the script root's code never ran", sent.reported_error)
        if hang:
            assert sent.reported is None and sent.reported_error is not None
            assert took < 3 + 5
        else:
            assert sent.reported is not None, sent.reported_error
        if mechanism == "cgroup":  # the step's own cgroup ended with the step
            wait_for(lambda: not any(map(alive, daemons)), 5, "the step's daemons to be gone")
            assert contained.pids() == set()
        else:  # the job's uid: what the step left is the attempt's, ended with it
            assert all(map(alive, daemons)) and set(daemons) <= contained.pids()
        contained.end()
        wait_for(lambda: not any(map(alive, daemons)), 5, "the attempt's daemons to be gone")
        if identity.uid is not None:
            assert processes_of_uid(identity.uid) == []
    finally:
        contained.end()
        for pid in [int(name) for name in os.listdir(drop)]:
            if alive(pid):
                psutil.Process(pid).kill()


def test_a_short_attempt_ends_after_its_provenance_step(
    hostile_settings: SupervisorSettings, mechanism: str
) -> None:
    """The ranks are done in a second; the interpreter report (importing torch) takes
    longer, and the attempt's end lets it finish rather than killing it."""
    (root,) = hostile_settings.script_roots
    (root / "quick.py").write_text("print('step 1 loss 1.0', flush=True)\n")
    os.chmod(root / "quick.py", 0o644)
    attempt = script_order(9, "quick.py")
    supervisor = Supervisor(attempt, hostile_settings)
    sent: list[Any] = []

    def provenance_step() -> None:  # what send_provenance does beside the ranks
        step = supervisor.containment.child("provenance")
        try:
            sent.append(provenance.collect(attempt, hostile_settings, "test-node", step))
        finally:
            step.end()

    thread = threading.Thread(target=provenance_step)
    thread.start()
    outcome = supervisor.run()
    thread.join(timeout=60)
    assert outcome.outcome == "succeeded", outcome.reason
    (report,) = sent
    assert report.reported is not None, report.reported_error
    assert report.reported.torch is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="ranks switch to the job user only as root")
def test_on_a_real_stack_an_ordinary_users_daemons_end_with_the_job(tmp_path: Path) -> None:
    """The attack as reported: an ordinary user's job daemonizes, then succeeds or is
    cancelled through the API; no process of its uid is left on the host after."""
    scripts = reachable(tmp_path / "scripts")
    (scripts / "daemonize.py").write_text(HOSTILE_RANK)
    os.chmod(scripts / "daemonize.py", 0o644)
    env = {"TRAINBOARD_SCRIPT_ROOTS": str(scripts)}
    with (
        trainboard_up(tmp_path, EMBEDDED_REDIS, cpu_slots=2, extra_env=env) as stack,
        ordinary_user(stack) as mallory,
    ):
        for mode, ending in (("exit", "succeeded"), ("wait", "cancelled")):
            daemonize_through_the_api(stack, mallory, mode=mode, ending=ending)


def daemonize_through_the_api(
    stack: RunningStack, mallory: httpx.Client, *, mode: str, ending: str
) -> None:
    spec = {
        "name": f"daemonizer-{mode}",
        "entrypoint": {"script": "daemonize.py", "args": [mode]},
        "parallelism": {"devices": 1},
    }
    created = mallory.post("/api/jobs", json=spec)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    run_dir = stack.data_dir / "runs" / f"job-{job_id}" / "attempt-1"
    pid_file = run_dir / "daemon.pid"
    daemon = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 120, "the daemon"))
    uid = psutil.Process(daemon).uids().real
    assert uid not in (0, os.getuid())
    assert os.getsid(daemon) != os.getsid(stack.process.pid)  # it left the worker's session
    (run_dir / "release").touch()
    if mode == "wait":
        mallory.post(f"/api/jobs/{job_id}/cancel").raise_for_status()
    job = wait_for(lambda: finished(mallory, job_id), 120, f"job {job_id} to end")
    assert job["state"] == ending, job
    # the stack's stop grace is 5 s; the job's end is reported after its processes
    wait_for(lambda: not alive(daemon), 5 + 5, f"job {job_id}'s daemon to be gone")
    assert processes_of_uid(uid) == []
