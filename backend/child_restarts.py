"""`trainboard up` keeps its children running: a child that dies is restarted with back-off.

The API (with its scheduler thread), the telemetry ingest and the local worker are separate
processes. If one dies (killed, out of memory, a crash), the others keep running: ranks keep
training through an API restart (the worker retries its API calls and keeps its lease for
the heartbeat timeout) and through an ingest restart (telemetry waits in Redis; the new
ingest takes over the dead one's unacknowledged round at once). Only Ctrl-C or SIGTERM stops
everything.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
#: a child that ran this long before dying starts its back-off over
HEALTHY_AFTER = 60.0
#: exit status of a child refusing its configuration (e.g. the worker's isolation check)
CONFIG_ERROR = 2


@dataclass
class Child:
    """One supervised process and how to start it again."""

    name: str
    start: Callable[[], subprocess.Popen[bytes]]
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    delay: float = FIRST_DELAY
    due: float | None = None  # when a dead child is started again


def exit_cause(code: int) -> str:
    """How a process ended, in words."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def keep_running(children: list[Child], *, poll: float = 0.5) -> int:
    """Restart dead children with back-off until interrupted; an exit code if one refuses."""
    while True:
        now = time.monotonic()
        for child in children:
            code = child.process.poll()
            if code is None or child.due is not None and now < child.due:
                continue
            if child.due is None:  # just found dead
                if code == CONFIG_ERROR and now - child.started < HEALTHY_AFTER:
                    print(f"{child.name} refused to start; stopping", file=sys.stderr, flush=True)
                    return CONFIG_ERROR
                if now - child.started > HEALTHY_AFTER:
                    child.delay = FIRST_DELAY
                child.due = now + child.delay
                message = f"the {child.name} {exit_cause(code)}; restarting in {child.delay:.0f} s"
                log.warning(message)
                print(message, file=sys.stderr, flush=True)
                child.delay = min(MAX_DELAY, child.delay * 2)
                continue
            child.process, child.started, child.due = child.start(), now, None
        time.sleep(poll)
