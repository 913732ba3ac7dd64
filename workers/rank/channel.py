"""A rank's end of its telemetry pipe: JSON lines written to the fd its supervisor gave it."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)


class TelemetryChannel:
    """Writes messages to the inherited pipe; silent once the supervisor's end is gone."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._broken = False

    def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (blocks only while the pipe is full)."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            if self._broken:
                return
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as err:  # the supervisor is gone: training goes on, unreported
                self._broken = True
                log.warning("telemetry pipe closed (%s): further points are not reported", err)

    def close(self) -> None:
        """Close this end of the pipe (the supervisor then sees end-of-file)."""
        with self._lock:
            if not self._broken:
                self._broken = True
                os.close(self._fd)
