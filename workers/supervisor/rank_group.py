"""The rank processes of one attempt: one process group, their output drained, their exit read."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from workers.supervisor.disk import LogLossNotice
from workers.supervisor.rank_output import OutputForwarder
from workers.telemetry import StreamPublisher

#: how long draining a rank's output may take once it exited (seconds)
DRAIN_SECONDS = 5.0


class RankGroup:
    """An attempt's local ranks in one process group: a signal to the group reaches them all."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        self._forwarders: list[OutputForwarder] = []
        self._stderr: list[OutputForwarder] = []
        self._pgid: int | None = None

    @property
    def pgid(self) -> int | None:
        """The group a new rank joins; None until the first rank starts it."""
        return self._pgid

    def add(self, process: subprocess.Popen[bytes]) -> None:
        """A rank started in `pgid`; the first one leads the attempt's process group."""
        if self._pgid is None:
            self._pgid = process.pid
        self.processes.append(process)

    def forward_output(
        self,
        process: subprocess.Popen[bytes],
        *,
        attempt_id: int,
        rank: int,
        logs: Path,
        publisher: StreamPublisher,
        on_stdout_line: Callable[[str], None] | None,
        on_write_error: LogLossNotice,
    ) -> None:
        """Drain the rank's stdout and stderr into its log files and the logs stream."""
        for stream, pipe in (("stdout", process.stdout), ("stderr", process.stderr)):
            assert pipe is not None
            forwarder = OutputForwarder(
                pipe,
                attempt_id=attempt_id,
                rank=rank,
                stream=stream,  # type: ignore[arg-type]
                log_file=logs / f"rank-{rank}.{stream}.log",
                publisher=publisher,
                on_line=on_stdout_line if stream == "stdout" else None,
                on_write_error=on_write_error,
            )
            self._forwarders.append(forwarder)
            if stream == "stderr":
                self._stderr.append(forwarder)

    def codes(self) -> list[int | None]:
        """Each rank's exit code, None while it runs."""
        return [p.poll() for p in self.processes]

    def exit_codes(self) -> list[int]:
        """The exit codes of the ranks that ended."""
        return [p.returncode for p in self.processes if p.returncode is not None]

    def signal(self, signum: int) -> None:
        """Send signum to every rank of the group (none started yet: nothing to do)."""
        if self._pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pgid, signum)

    def kill(self) -> None:
        """Kill the whole group and wait for every rank: none outlives this call."""
        self.signal(signal.SIGKILL)
        for process in self.processes:
            process.wait()

    def drain(self) -> None:
        """Wait (a while) for the ranks' output to be written out."""
        for forwarder in self._forwarders:
            forwarder.join(timeout=DRAIN_SECONDS)

    def exit_reason(self, index: int) -> str:
        """How rank `index` ended, with the last lines of its stderr."""
        code = self.processes[index].returncode
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        self._stderr[index].join(timeout=2.0)
        tail = "\n".join(self._stderr[index].tail)
        return f"rank {index} {how}" + (f"; last stderr lines:\n{tail}" if tail else "")
