"""The NVML adapter, fed recorded pynvml answers (the only stand-in: this machine has no GPU)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from workers.agent import detect_devices
from workers.devices.host import HostProbe
from workers.devices.nvml import NvmlProbe
from workers.devices.registry import DeviceRegistry
from workers.settings import WorkerSettings

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


def recorded_nvml(monkeypatch: pytest.MonkeyPatch, gpus: list[dict[str, Any]]) -> None:
    """Replace the pynvml calls the adapter makes with answers recorded per GPU."""

    def answer(index: int, field: str) -> Any:
        value = gpus[index][field]
        if isinstance(value, pynvml.NVMLError):
            raise value
        return value

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
