"""Each rank's Python stack at a hang, saved as a file of the attempt and sent to the API.

The supervisor signals SIGUSR1; faulthandler in the rank writes every thread's stack to its
stderr, which the supervisor captures into `rank-<r>.stderr.log` in the attempt's log dir.
What arrived there after the signal is copied to `hang-stacks/rank-<r>.txt` beside it (the
log dir is the service's own: no job user writes there) and published as a `hang_stack`
event, which the API serves to the job's owner (GET /api/jobs/{id}/hang-stacks).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from workers.contract.protocol import AttemptEvent
from workers.telemetry import StreamPublisher

log = logging.getLogger(__name__)

KIND = "hang_stack"
DIRECTORY = "hang-stacks"
#: the most of one rank's dump kept in its file; its event carries the first 4 KiB
MAX_FILE_BYTES = 64 * 1024
MAX_EVENT_CHARS = 4096
#: faulthandler's header line of each thread ("Thread 0x... (most recent call first):")
HEADER = "(most recent call first)"
#: how long the ranks get to write their stacks (a loaded machine may be slow to drain pipes)
WAIT_SECONDS = 5.0
POLL_SECONDS = 0.25


def stderr_log(logs: Path, rank: int) -> Path:
    """The file the supervisor captures a rank's stderr into (rank_group.forward_output)."""
    return logs / f"rank-{rank}.stderr.log"


def stack_file(logs: Path, rank: int) -> Path:
    """Where one rank's stack at the newest hang is kept."""
    return logs / DIRECTORY / f"rank-{rank}.txt"


def offsets(logs: Path, ranks: list[int]) -> dict[int, int]:
    """How much of each rank's stderr log exists before it is asked for its stack."""
    found = {}
    for rank in ranks:
        try:
            found[rank] = stderr_log(logs, rank).stat().st_size
        except OSError:
            found[rank] = 0
    return found


def _since(path: Path, offset: int) -> str:
    """What was appended to a log after `offset`, from its first stack header on, capped."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            raw = file.read(MAX_FILE_BYTES)
    except OSError:
        return ""
    text = raw.decode("utf-8", errors="replace")
    start = text.find(HEADER)
    return "" if start < 0 else text[text.rfind("\n", 0, start) + 1 :]


def collect(logs: Path, since: dict[int, int], *, wait: float = WAIT_SECONDS) -> dict[int, str]:
    """Each rank's dump once every rank's has arrived and stopped growing, or at `wait`."""
    deadline = time.monotonic() + wait
    previous: dict[int, str] = {}
    while True:
        stacks = {rank: _since(stderr_log(logs, rank), at) for rank, at in since.items()}
        settled = all(stacks.values()) and stacks == previous
        if settled or time.monotonic() >= deadline:
            return stacks
        previous = stacks
        time.sleep(POLL_SECONDS)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o750, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o640)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)


def save(
    logs: Path,
    since: dict[int, int],
    *,
    attempt_id: int,
    step: int,
    events: StreamPublisher,
    wait: float = WAIT_SECONDS,
) -> dict[int, str]:
    """Collect each rank's dump, write it to its file and publish it; rank → stack."""
    stacks = collect(logs, since, wait=wait)
    for rank, stack in sorted(stacks.items()):
        text = stack or "no stack arrived within the wait (the rank did not answer SIGUSR1)\n"
        try:
            _write(stack_file(logs, rank), text)
        except OSError as err:
            log.warning("attempt %d: rank %d's stack not saved: %s", attempt_id, rank, err)
        header = f"rank {rank}\n"
        message = header + text[: MAX_EVENT_CHARS - len(header)]
        events.add(
            AttemptEvent(
                attempt_id=attempt_id, kind=KIND, message=message, step=step, time=time.time()
            )
        )
    return stacks


def save_later(
    logs: Path, since: dict[int, int], *, attempt_id: int, step: int, events: StreamPublisher
) -> threading.Thread:
    """`save` in a thread, so the supervisor's poll loop goes on while ranks dump."""
    kwargs = {"attempt_id": attempt_id, "step": step, "events": events}
    thread = threading.Thread(
        target=save, args=(logs, since), kwargs=kwargs, name="hang-stacks", daemon=True
    )
    thread.start()
    return thread
