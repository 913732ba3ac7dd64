"""Run a command that dies with its supervisor (`python -m workers.supervisor.orphan_guard ...`).

Rank processes live in their own process group so a cancel can signal them all; that
also means nothing kills them if the worker itself is killed (`kill -9`, OOM). Before
exec'ing the real command this asks Linux to SIGKILL the process when its parent dies
(PR_SET_PDEATHSIG, which survives exec), so a lost node leaves no orphan training on
its devices while the job restarts elsewhere. It also sets PR_SET_NO_NEW_PRIVS, so
user code can never gain privileges through a setuid binary or file capabilities.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
#: from here on, exec can grant no privilege (setuid binaries, file capabilities)
PR_SET_NO_NEW_PRIVS = 38


def guarded(command: list[str]) -> list[str]:
    """The command wrapped so it is killed when the calling process dies."""
    # isolated (-I: no PYTHONPATH, no user site, no script dir on the path) and by file:
    # a job's script root comes first on its PYTHONPATH and must not shadow this module,
    # or user code would run before no-new-privs and the parent-death signal are set
    return [sys.executable, "-I", __file__, str(os.getpid()), "--", *command]


def main(argv: list[str]) -> None:
    parent, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit(
            "usage: python -m workers.supervisor.orphan_guard PARENT_PID -- COMMAND ..."
        )
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SystemExit("cannot set PR_SET_NO_NEW_PRIVS: refusing to run user code")
    if os.getppid() != int(parent):
        raise SystemExit("the supervisor died before this rank started")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
