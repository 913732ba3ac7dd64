"""NVIDIA GPUs through NVML: lazy init once; an unreadable field is None, never a crash."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import pynvml

from workers.contract.protocol import DeviceSample, GpuProcess, NodeDevice

log = logging.getLogger(__name__)


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlProbe:
    """Reads the node's GPUs; `create()` returns None where NVML cannot start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._broken: set[int] = set()
        #: NVML event set receiving Xid critical errors; None where the driver refuses it
        self._events: Any = None
        #: GPUs whose Xid errors are watched (their samples carry `xids`, [] when none)
        self._xid_watched: set[int] = set()

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
        probe._watch_xids()
        return probe

    def _watch_xids(self) -> None:
        """Register every GPU that allows it for Xid critical error events."""
        try:
            self._events = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as err:
            log.info("NVML events unavailable (%s); no Xid reporting", err)
            return
        for index in range(self._count):
            handle = self._handle(index)
            if handle is None:
                continue
            try:
                pynvml.nvmlDeviceRegisterEvents(
                    handle, pynvml.nvmlEventTypeXidCriticalError, self._events
                )
            except pynvml.NVMLError as err:  # NOT_SUPPORTED on some boards and in some VMs
                log.info("GPU %d: no Xid events (%s)", index, err)
                continue
            self._xid_watched.add(index)

    def shutdown(self) -> None:
        """Release NVML."""
        if self._events is not None:
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlEventSetFree(self._events)
            self._events = None
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
            xids = self._pending_xids()
            return [
                self._sample_one(node, index, now, xids.get(index)) for index in range(self._count)
            ]

    def _pending_xids(self) -> dict[int, list[int]]:
        """Xid errors reported since the last call, per watched GPU ([] when none)."""
        found: dict[int, list[int]] = {index: [] for index in self._xid_watched}
        while self._events is not None:
            try:
                event = pynvml.nvmlEventSetWait(self._events, 0)
            except pynvml.NVMLError as err:
                if err.value != pynvml.NVML_ERROR_TIMEOUT:  # TIMEOUT: nothing more queued
                    log.warning("NVML event wait failed: %s", err)
                break
            try:
                index = int(pynvml.nvmlDeviceGetIndex(event.device))
            except pynvml.NVMLError:
                continue
            if index in found and len(found[index]) < 64:
                found[index].append(int(event.eventData))
        return found

    def _processes(self, index: int, handle: Any) -> list[GpuProcess] | None:
        """Compute and graphics processes with their GPU memory; None when NVML hides them."""
        compute = self._field(index, pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
        graphics = self._field(index, pynvml.nvmlDeviceGetGraphicsRunningProcesses, handle)
        if compute is None and graphics is None:
            return None
        used: dict[int, int | None] = {}
        for process in [*(compute or []), *(graphics or [])]:
            memory = getattr(process, "usedGpuMemory", None)  # None: not available (no perms)
            memory = int(memory) if memory is not None and memory >= 0 else None
            earlier = used.get(int(process.pid))
            # a process in both lists is reported with the same memory: count it once
            used[int(process.pid)] = max(earlier or 0, memory) if memory is not None else earlier
        return [GpuProcess(pid=pid, mem_used=memory) for pid, memory in sorted(used.items())]

    def _ecc(self, index: int, handle: Any, kind: int) -> int | None:
        count = self._field(
            index, pynvml.nvmlDeviceGetTotalEccErrors, handle, kind, pynvml.NVML_VOLATILE_ECC
        )
        return int(count) if count is not None else None

    def _sample_one(
        self, node: str, index: int, now: float, xids: list[int] | None = None
    ) -> DeviceSample:
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
            processes=self._processes(index, handle),
            ecc_corrected=self._ecc(index, handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ecc_uncorrected=self._ecc(index, handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            xids=xids,
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
