"""Forwarding of a rank's stdout/stderr lines to tb:logs and to a log file in the run dir."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal

from workers.contract.protocol import LogLine
from workers.telemetry import StreamPublisher

MAX_LINE = 8192


class OutputForwarder:
    """A thread that reads one pipe line by line until it closes."""

    def __init__(
        self,
        pipe: IO[bytes],
        *,
        attempt_id: int,
        rank: int,
        stream: Literal["stdout", "stderr"],
        log_file: Path,
        publisher: StreamPublisher,
        keep_last: int = 20,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self._pipe, self._log_file, self._publisher = pipe, log_file, publisher
        self._on_line = on_line
        self._attempt_id, self._rank, self._stream = attempt_id, rank, stream
        self.tail: deque[str] = deque(maxlen=keep_last)
        self._thread = threading.Thread(target=self._run, name=f"rank{rank}-{stream}", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the pipe is drained."""
        self._thread.join(timeout)

    def _run(self) -> None:
        with self._pipe, self._log_file.open("ab") as file:
            for seq, raw in enumerate(iter(self._pipe.readline, b"")):
                file.write(raw)
                file.flush()
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:MAX_LINE]
                self.tail.append(line)
                if self._on_line is not None:
                    self._on_line(line)
                self._publisher.add(
                    LogLine(
                        attempt_id=self._attempt_id,
                        rank=self._rank,
                        stream=self._stream,
                        seq=seq,
                        line=line,
                        time=time.time(),
                    )
                )
