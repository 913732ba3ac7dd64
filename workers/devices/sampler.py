"""A thread that samples the node's devices and publishes DeviceSamples to tb:devices."""

from __future__ import annotations

import logging
import threading
import time

from workers.devices import DeviceProbe
from workers.devices.registry import DeviceRegistry
from workers.protocol import DeviceSample
from workers.telemetry import StreamPublisher

log = logging.getLogger(__name__)


class DeviceSampler:
    """Samples every `interval` seconds, attributing each device to the rank running on it."""

    def __init__(
        self,
        probe: DeviceProbe,
        registry: DeviceRegistry,
        publisher: StreamPublisher,
        *,
        node: str,
        interval: float,
    ) -> None:
        self._probe = probe
        self._registry = registry
        self._publisher = publisher
        self._node = node
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="device-sampler", daemon=True)

    def start(self) -> None:
        """Start sampling in the background."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout)

    def sample_once(self) -> list[DeviceSample]:
        """Read every device once, attribute it, and publish the samples."""
        samples = [self._attribute(s) for s in self._probe.sample(self._node, time.time())]
        for sample in samples:
            self._publisher.add(sample)
        return samples

    def _attribute(self, sample: DeviceSample) -> DeviceSample:
        occupant = self._registry.get(sample.device)
        if occupant is None:
            return sample
        return sample.model_copy(update={"attempt_id": occupant.attempt_id, "rank": occupant.rank})

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # a probe bug must not end sampling for the node's lifetime
                log.exception("device sampling failed")
            next_at = max(next_at + self._interval, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))
