"""A rank started through the orphan guard dies when its supervisor is killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys

import psutil

from tests.stack import wait_for

SUPERVISOR = (
    "import subprocess, time\n"
    "from workers.supervisor.orphan_guard import guarded\n"
    "rank = subprocess.Popen(guarded(['sleep', '120']), process_group=0)\n"
    "print(rank.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _runs(pid: int, program: str) -> bool:
    """Whether pid is alive and has exec'd program (its cmdline is empty mid-exec)."""
    try:
        command = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return _alive(pid) and bool(command) and command[0] == program


def test_rank_in_its_own_process_group_dies_with_a_killed_supervisor() -> None:
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR], stdout=subprocess.PIPE, text=True
    )
    assert supervisor.stdout is not None
    rank = int(supervisor.stdout.readline())
    wait_for(
        lambda: _runs(rank, "sleep"),
        timeout=10,
        what="the guarded command to exec",
    )
    assert psutil.Process(rank).pid == rank and _alive(rank)
    supervisor.kill()
    supervisor.wait()
    wait_for(lambda: not _alive(rank), timeout=5, what="the orphaned rank to be killed")


def test_guard_refuses_to_start_when_its_supervisor_is_already_gone() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workers.supervisor.orphan_guard", "1", "--", "true"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "supervisor died" in result.stderr
