"""A thread that tells the backend this node is alive, re-registering when it was forgotten."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from workers.devices.host import host_stats
from workers.node.api_client import ApiError, NodeApiClient

log = logging.getLogger(__name__)


class Heartbeat:
    """Posts a heartbeat, with the machine's CPU and memory, every `interval` seconds."""

    def __init__(
        self, api: NodeApiClient, node: str, interval: float, reregister: Callable[[], object]
    ) -> None:
        self._api, self._node, self._interval = api, node, interval
        self._reregister = reregister
        self._stop = threading.Event()
        self.drained = False
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        """Start beating in the background."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                drained = self._api.heartbeat(
                    self._node, host=host_stats(), retry_for=self._interval
                )
            except ApiError as err:
                log.warning("heartbeat failed (%s); registering again", err)
                try:
                    self._reregister()
                except ApiError as again:
                    log.warning("registration failed: %s", again)
                continue
            if drained != self.drained:
                log.info("node %s is %s", self._node, "drained" if drained else "accepting work")
                self.drained = drained
