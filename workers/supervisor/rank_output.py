"""Forwarding of a rank's stdout/stderr lines to tb:logs and to a log file in the run dir."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal

from workers.contract.protocol import LogLine
from workers.telemetry import StreamPublisher

MAX_LINE = 8192


class LogFile:
    """A rank's log file that never raises: lines it cannot write are counted and dropped.

    A full disk must not stop the pipe being drained (a rank blocked or killed by its own
    print is a training run lost to logging); each line tries the disk again, so writing
    resumes by itself once there is space, with a note of how many lines are missing.
    """

    def __init__(self, path: Path, on_error: Callable[[OSError], None]) -> None:
        self._path, self._on_error = path, on_error
        self._fd: int | None = None
        self.dropped = 0  # lines not written since the last successful write

    def open(self) -> None:
        """Create the file now, so that an empty stream still has its (empty) log."""
        try:
            self._open()
        except OSError as error:
            self._on_error(error)

    def write(self, raw: bytes) -> None:
        """Append one line, or count it as dropped."""
        if self.dropped:
            raw = f"[trainboard: {self.dropped} lines not written to disk]\n".encode() + raw
        try:
            view = memoryview(raw)
            fd = self._open()
            while view:
                view = view[os.write(fd, view) :]
        except OSError as error:
            self.dropped += 1
            self._on_error(error)
            return
        self.dropped = 0

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def close(self) -> None:
        """Close the file, if it was ever opened."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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
        on_write_error: Callable[[OSError], None] = lambda error: None,
    ) -> None:
        self._pipe, self._publisher = pipe, publisher
        self._log_file = LogFile(log_file, on_write_error)
        self._on_line = on_line
        self._attempt_id, self._rank, self._stream = attempt_id, rank, stream
        self.tail: deque[str] = deque(maxlen=keep_last)
        self._thread = threading.Thread(target=self._run, name=f"rank{rank}-{stream}", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Lines not written to the log file since the last one that was."""
        return self._log_file.dropped

    def join(self, timeout: float | None = None) -> None:
        """Wait until the pipe is drained."""
        self._thread.join(timeout)

    def _run(self) -> None:
        with self._pipe:
            self._log_file.open()
            try:
                for seq, raw in enumerate(iter(self._pipe.readline, b"")):
                    self._forward(seq, raw)
            finally:
                self._log_file.close()

    def _forward(self, seq: int, raw: bytes) -> None:
        self._log_file.write(raw)
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
