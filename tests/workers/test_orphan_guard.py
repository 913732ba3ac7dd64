"""A rank started through the orphan guard dies when its supervisor is killed with SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.stack import wait_for
from workers.supervisor.orphan_guard import guarded

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


@pytest.mark.slow  # a supervisor and a rank as child processes
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


def test_a_job_cannot_shadow_the_guard_with_its_own_workers_package(tmp_path: Path) -> None:
    fake = tmp_path / "workers" / "supervisor"
    fake.mkdir(parents=True)
    for package in (tmp_path / "workers", fake):
        (package / "__init__.py").write_text("")
    marker = tmp_path / "ran-user-code"
    (fake / "orphan_guard.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    command = guarded([sys.executable, "-c", "import ctypes; print('guarded')"])
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the job's script root, first
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "guarded" in done.stdout
    assert not marker.exists()
