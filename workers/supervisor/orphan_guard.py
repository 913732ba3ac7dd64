"""Run a command that dies with its supervisor (`python -m workers.supervisor.orphan_guard ...`).

Rank processes live in their own process group so a cancel can signal them all; that
also means nothing kills them if the worker itself is killed (`kill -9`, OOM). Before
exec'ing the real command this asks Linux to SIGKILL the process when its parent dies
(PR_SET_PDEATHSIG, which survives exec), so a lost node leaves no orphan training on
its devices while the job restarts elsewhere. It also sets PR_SET_NO_NEW_PRIVS, so
user code can never gain privileges through a setuid binary or file capabilities.
Given `--cgroup PATH`, it waits until its supervisor has moved it into that cgroup (the
attempt's) before running anything of the job's, so every process the job ever starts
is born inside it, however it detaches later.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
#: from here on, exec can grant no privilege (setuid binaries, file capabilities)
PR_SET_NO_NEW_PRIVS = 38
#: how long the guard waits to be moved into its attempt's cgroup (seconds)
CGROUP_WAIT_SECONDS = 30.0


def guarded(command: list[str], *, cgroup: str | None = None) -> list[str]:
    """The command wrapped so it is killed when the calling process dies.

    With cgroup, it starts only once the caller has moved it into that cgroup.
    """
    # isolated (-I: no PYTHONPATH, no user site, no script dir on the path) and by file:
    # a job's script root comes first on its PYTHONPATH and must not shadow this module,
    # or user code would run before no-new-privs and the parent-death signal are set
    wait = ["--cgroup", cgroup] if cgroup is not None else []
    return [sys.executable, "-I", __file__, str(os.getpid()), *wait, "--", *command]


def _await_cgroup(cgroup: str) -> None:
    """Return once this process is in cgroup (v2); exit if it is not moved in time."""
    deadline = time.monotonic() + CGROUP_WAIT_SECONDS
    while time.monotonic() < deadline:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        if f"0::{cgroup}" in lines:
            return
        time.sleep(0.005)
    raise SystemExit(f"not moved into the attempt's cgroup {cgroup}: refusing to run user code")


def main(argv: list[str]) -> None:
    parent, *rest = argv
    cgroup = None
    if rest[:1] == ["--cgroup"] and len(rest) > 1:
        cgroup, rest = rest[1], rest[2:]
    separator, *command = rest or [""]
    if separator != "--" or not command:
        raise SystemExit(
            "usage: python -m workers.supervisor.orphan_guard PARENT_PID [--cgroup PATH] "
            "-- COMMAND ..."
        )
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SystemExit("cannot set PR_SET_NO_NEW_PRIVS: refusing to run user code")
    if os.getppid() != int(parent):
        raise SystemExit("the supervisor died before this rank started")
    if cgroup is not None:
        _await_cgroup(cgroup)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
