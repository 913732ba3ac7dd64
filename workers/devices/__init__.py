"""Device probes: NVIDIA GPUs through NVML, or CPU slots on a machine without GPUs."""

from __future__ import annotations

from typing import Protocol

from workers.contract.protocol import DeviceSample, NodeDevice


class DeviceProbe(Protocol):
    """What the node agent needs from a kind of device."""

    def devices(self) -> list[NodeDevice]:
        """The devices this node offers, for registration."""
        ...

    def sample(self, node: str, now: float) -> list[DeviceSample]:
        """One reading per device (attempt attribution is filled in by the sampler)."""
        ...
