"""NVIDIA GPUs through NVML: lazy init once; an unreadable field is None, never a crash."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import pynvml

from workers.protocol import DeviceSample, NodeDevice

log = logging.getLogger(__name__)


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlProbe:
    """Reads the node's GPUs; `create()` returns None where NVML cannot start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._broken: set[int] = set()

    @classmethod
    def create(cls) -> NvmlProbe | None:
        """Initialise NVML once; None when there is no driver or no GPU, so callers fall back."""
        probe = cls()
        try:
            pynvml.nvmlInit()
            probe._count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as err:
            log.info("NVML unavailable (%s); using CPU slots", err)
            return None
        if probe._count == 0:
            probe.shutdown()
            return None
        return probe

    def shutdown(self) -> None:
        """Release NVML."""
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()

    def devices(self) -> list[NodeDevice]:
        """Index, UUID, name and total memory of every GPU, for registration."""
        found = []
        for index in range(self._count):
            handle = self._handle(index)
            memory = self._field(index, pynvml.nvmlDeviceGetMemoryInfo, handle)
            name = self._field(index, pynvml.nvmlDeviceGetName, handle)
            uuid = self._field(index, pynvml.nvmlDeviceGetUUID, handle)
            found.append(
                NodeDevice(
                    index=index,
                    kind="gpu",
                    name=_text(name) if name is not None else f"GPU {index}",
                    uuid=_text(uuid) if uuid is not None else None,
                    memory_total=int(memory.total) if memory is not None else None,
                )
            )
        return found

    def sample(self, node: str, now: float) -> list[DeviceSample]:
        """Utilisation, memory, temperature and power of every GPU, each read on its own."""
        with self._lock:
            return [self._sample_one(node, index, now) for index in range(self._count)]

    def _sample_one(self, node: str, index: int, now: float) -> DeviceSample:
        handle = self._handle(index)
        util = self._field(index, pynvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._field(index, pynvml.nvmlDeviceGetMemoryInfo, handle)
        temperature = self._field(
            index, pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU
        )
        power_mw = self._field(index, pynvml.nvmlDeviceGetPowerUsage, handle)
        return DeviceSample(
            node=node,
            device=index,
            kind="gpu",
            time=now,
            util=float(util.gpu) if util is not None else None,
            mem_used=int(memory.used) if memory is not None else None,
            mem_total=int(memory.total) if memory is not None else None,
            temperature=float(temperature) if temperature is not None else None,
            power=power_mw / 1000.0 if power_mw is not None else None,
        )

    def _handle(self, index: int) -> Any:
        """The NVML handle of a GPU, or None when it cannot be had (the GPU is lost)."""
        return self._field(index, pynvml.nvmlDeviceGetHandleByIndex, index)

    def _field(self, index: int, read: Callable[..., Any], *args: Any) -> Any:
        """One NVML call; None (logged once per GPU) on NVMLError or without a handle."""
        if args and args[0] is None:
            return None
        try:
            return read(*args)
        except pynvml.NVMLError as err:
            if err.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                return None
            if index not in self._broken:
                self._broken.add(index)
                log.warning("GPU %d: %s failed: %s", index, getattr(read, "__name__", read), err)
            return None
