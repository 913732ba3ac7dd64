"""The NVML adapter, fed recorded pynvml answers (the only stand-in: this machine has no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from workers.devices.host import HostProbe
from workers.devices.nvml import NvmlProbe
from workers.devices.registry import DeviceRegistry, Occupant
from workers.devices.sampler import attribute
from workers.node.agent import detect_devices
from workers.node.settings import WorkerSettings

GIB = 1024**3

#: what two H100s answered, field by field; an NVMLError instance means that call raises it
H100 = {
    "name": b"NVIDIA H100 80GB HBM3",
    "uuid": "GPU-6f1c2b7e-0000-4c1d-9c55-0123456789ab",
    "memory": SimpleNamespace(total=80 * GIB, used=12 * GIB, free=68 * GIB),
    "util": SimpleNamespace(gpu=87, memory=40),
    "temperature": 61,
    "power_mw": 312_500,
}


ECC_FIELDS = {
    pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED: "ecc_corrected",
    pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED: "ecc_uncorrected",
}


def recorded_nvml(
    monkeypatch: pytest.MonkeyPatch, gpus: list[dict[str, Any]], events: list[Any] | None = None
) -> None:
    """Replace the pynvml calls the adapter makes with answers recorded per GPU.

    events: Xid events queued in the event set, handed out one per nvmlEventSetWait.
    """
    events = events if events is not None else []

    def answer(index: int, field: str) -> Any:
        # a field not recorded is one this GPU's driver does not support
        value = gpus[index].get(field, pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
        if isinstance(value, pynvml.NVMLError):
            raise value
        return value

    def wait(event_set: object, timeout_ms: int) -> Any:
        if not events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return events.pop(0)

    def register(h: int, kinds: int, event_set: object) -> None:
        assert kinds == pynvml.nvmlEventTypeXidCriticalError
        answer(h, "xid_events")

    def handle(index: int) -> int:
        return answer(index, "handle") if "handle" in gpus[index] else index

    calls = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetName": lambda h: answer(h, "name"),
        "nvmlDeviceGetUUID": lambda h: answer(h, "uuid"),
        "nvmlDeviceGetMemoryInfo": lambda h: answer(h, "memory"),
        "nvmlDeviceGetUtilizationRates": lambda h: answer(h, "util"),
        "nvmlDeviceGetTemperature": lambda h, sensor: answer(h, "temperature"),
        "nvmlDeviceGetPowerUsage": lambda h: answer(h, "power_mw"),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: answer(h, "compute"),
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: answer(h, "graphics"),
        "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: answer(h, ECC_FIELDS[kind]),
        "nvmlDeviceGetIndex": lambda h: h,
        "nvmlEventSetCreate": lambda: "event-set",
        "nvmlEventSetFree": lambda event_set: None,
        "nvmlDeviceRegisterEvents": register,
        "nvmlEventSetWait": wait,
    }
    for name, fake in calls.items():
        monkeypatch.setattr(pynvml, name, fake)


def error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


def test_without_a_driver_create_returns_none_so_the_agent_uses_cpu_slots() -> None:
    assert NvmlProbe.create() is None  # the real pynvml: no libnvidia-ml on this machine
    probe, use_gpus = detect_devices(WorkerSettings(cpu_slots=3), DeviceRegistry())
    assert isinstance(probe, HostProbe) and not use_gpus
    assert [d.name for d in probe.devices()] == ["CPU slot 0", "CPU slot 1", "CPU slot 2"]


def test_init_failure_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded_nvml(monkeypatch, [H100])
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: (_ for _ in ()).throw(error(9)))
    assert NvmlProbe.create() is None


def test_registration_lists_index_uuid_name_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded_nvml(monkeypatch, [H100, {**H100, "uuid": "GPU-second"}])
    probe = NvmlProbe.create()
    assert probe is not None
    devices = probe.devices()
    assert [(d.index, d.kind, d.uuid) for d in devices] == [
        (0, "gpu", H100["uuid"]),
        (1, "gpu", "GPU-second"),
    ]
    assert devices[0].name == "NVIDIA H100 80GB HBM3"  # bytes from old drivers are decoded
    assert devices[0].memory_total == 80 * GIB


def test_sample_reads_every_field_in_its_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded_nvml(monkeypatch, [H100])
    probe = NvmlProbe.create()
    assert probe is not None
    (sample,) = probe.sample("gpu-node", now=1000.0)
    assert (sample.node, sample.device, sample.kind, sample.time) == ("gpu-node", 0, "gpu", 1000.0)
    assert sample.util == 87.0
    assert (sample.mem_used, sample.mem_total) == (12 * GIB, 80 * GIB)
    assert sample.temperature == 61.0
    assert sample.power == 312.5  # watts, from milliwatts


def test_an_unsupported_field_is_none_and_the_others_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_power = {**H100, "power_mw": error(pynvml.NVML_ERROR_NOT_SUPPORTED)}
    recorded_nvml(monkeypatch, [no_power])
    probe = NvmlProbe.create()
    assert probe is not None
    (sample,) = probe.sample("gpu-node", now=1.0)
    assert sample.power is None
    assert (sample.util, sample.temperature, sample.mem_used) == (87.0, 61.0, 12 * GIB)


def test_a_gpu_that_fell_off_the_bus_reads_as_empty_and_sampling_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lost = error(pynvml.NVML_ERROR_GPU_IS_LOST)
    lost_fields = {f: lost for f in ("name", "uuid", "memory", "util", "temperature", "power_mw")}
    gpus = [H100, dict(H100), dict(H100)]
    recorded_nvml(monkeypatch, gpus)
    probe = NvmlProbe.create()
    assert probe is not None
    assert probe.sample("gpu-node", now=1.0)[1].util == 87.0

    gpus[1].update(lost_fields)  # GPU 1 is lost between two samples: every field call fails
    gpus[2]["handle"] = lost  # GPU 2 is lost so badly that even its handle cannot be had
    first, second, third = probe.sample("gpu-node", now=2.0)
    assert first.util == 87.0 and first.power == 312.5
    for gone in (second, third):
        assert (gone.util, gone.mem_used, gone.mem_total, gone.temperature, gone.power) == (
            None,
            None,
            None,
            None,
            None,
        )
    assert [d.name for d in probe.devices()] == ["NVIDIA H100 80GB HBM3", "GPU 1", "GPU 2"]


def process(pid: int, used: int | None) -> SimpleNamespace:
    """A c_nvmlProcessInfo_t as pynvml returns it (usedGpuMemory None: not available)."""
    return SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF)


#: a training node's H100: two ranks' processes, ECC counters, Xid events supported
BUSY_H100 = {
    **H100,
    "compute": [process(4242, 9 * GIB), process(5151, 512 * 1024**2)],
    "graphics": [],
    "ecc_corrected": 3,
    "ecc_uncorrected": 0,
    "xid_events": None,
}


def test_sample_lists_gpu_processes_ecc_counters_and_xids(monkeypatch: pytest.MonkeyPatch) -> None:
    xid_79 = SimpleNamespace(device=0, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
    events = [xid_79]
    recorded_nvml(monkeypatch, [BUSY_H100, H100], events)
    probe = NvmlProbe.create()
    assert probe is not None
    busy, idle = probe.sample("gpu-node", now=1.0)
    assert [(p.pid, p.mem_used) for p in busy.processes or []] == [
        (4242, 9 * GIB),
        (5151, 512 * 1024**2),
    ]
    assert (busy.ecc_corrected, busy.ecc_uncorrected) == (3, 0)
    assert busy.xids == [79]  # the GPU fell off the bus
    # the second GPU's driver reports neither processes, ECC nor Xid events
    assert (idle.processes, idle.ecc_corrected, idle.ecc_uncorrected, idle.xids) == (
        None,
        None,
        None,
        None,
    )
    (again, _) = probe.sample("gpu-node", now=2.0)
    assert again.xids == []  # each Xid is reported once; [] means watched and none seen


def test_hidden_memory_and_a_process_in_both_lists_are_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = {
        **BUSY_H100,
        "compute": [process(10, 2 * GIB), process(11, None)],  # no permission for pid 11
        "graphics": [process(10, 2 * GIB)],
    }
    recorded_nvml(monkeypatch, [gpu])
    probe = NvmlProbe.create()
    assert probe is not None
    (sample,) = probe.sample("n", now=1.0)
    assert [(p.pid, p.mem_used) for p in sample.processes or []] == [(10, 2 * GIB), (11, None)]


def test_gpu_memory_is_attributed_to_the_rank_owning_each_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a real rank process (this test) and its real child (a data-loader worker, say)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        me = os.getpid()
        gpu = {
            **BUSY_H100,
            "compute": [process(me, 6 * GIB), process(worker.pid, GIB), process(2**22 + 7, GIB)],
        }
        recorded_nvml(monkeypatch, [gpu])
        probe = NvmlProbe.create()
        assert probe is not None
        registry = DeviceRegistry()
        registry.assign(0, Occupant(attempt_id=7, rank=3, pid=me))
        (sample,) = probe.sample("n", now=1.0)
        attributed = attribute(sample, registry)
    finally:
        worker.kill()
        worker.wait()
    assert (attributed.attempt_id, attributed.rank) == (7, 3)
    owners = [(p.pid, p.mem_used, p.attempt_id, p.rank) for p in attributed.processes or []]
    assert owners == sorted(  # listed by pid
        [
            (me, 6 * GIB, 7, 3),
            (worker.pid, GIB, 7, 3),
            (2**22 + 7, GIB, None, None),  # not a rank's process: unattributed
        ]
    )


def test_a_rank_on_another_slot_owns_its_process_on_this_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded_nvml(monkeypatch, [BUSY_H100, BUSY_H100])
    probe = NvmlProbe.create()
    assert probe is not None
    registry = DeviceRegistry()
    registry.assign(1, Occupant(attempt_id=9, rank=1, pid=5151))  # 5151 runs on GPU 1
    first, _ = [attribute(s, registry) for s in probe.sample("n", now=1.0)]
    assert (first.attempt_id, first.rank) == (None, None)  # GPU 0's slot is idle
    assert [(p.pid, p.attempt_id, p.rank) for p in first.processes or []][1] == (5151, 9, 1)
