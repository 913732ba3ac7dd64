"""A thread that samples the node's devices and publishes DeviceSamples to tb:devices."""

from __future__ import annotations

import logging
import threading
import time

from workers.contract.protocol import DeviceSample
from workers.devices import DeviceProbe
from workers.devices.registry import DeviceRegistry
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
        return attribute(sample, self._registry)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # a probe bug must not end sampling for the node's lifetime
                log.exception("device sampling failed")
            next_at = max(next_at + self._interval, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))


def attribute(sample: DeviceSample, registry: DeviceRegistry) -> DeviceSample:
    """The sample with its slot's rank, and each GPU process with the rank owning its pid.

    A process is attributed to a rank when its pid is the rank's or a descendant's (a
    rank's data-loader workers); a process of another rank (NCCL contexts on a peer's
    GPU) counts for that rank; an unknown pid keeps attempt_id and rank None.
    """
    update: dict[str, object] = {}
    occupant = registry.get(sample.device)
    if occupant is not None:
        update = {"attempt_id": occupant.attempt_id, "rank": occupant.rank}
    if sample.processes:
        processes = []
        for process in sample.processes:
            owner = registry.owner_of(process.pid)
            if owner is not None:
                process = process.model_copy(
                    update={"attempt_id": owner.attempt_id, "rank": owner.rank}
                )
            processes.append(process)
        update["processes"] = processes
    return sample.model_copy(update=update) if update else sample
