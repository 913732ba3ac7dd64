"""Device sampling cost per device and sample: the host probe, and the NVML adapter's own code.

    python -m benchmarks.sampling_cost [--samples 2000]

Host probe: 2 CPU slots, each holding a real process (this one and a child), read with
psutil as the node agent does (`HostProbe.sample` then `attribute`).

NVML adapter: this machine has no GPU, so pynvml answers from recorded H100 values
(tests/workers/test_nvml.py's stand-in at the pynvml call boundary) for 8 GPUs, each with
two compute processes (one of them a rank's) and ECC counters, Xid events watched. What is
timed is our code around the calls (field-by-field reads, error handling, attribution,
building the sample); the driver's own time per call is not in it. Baseline, same run: the
same pynvml calls made back to back with no adapter around them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable

import pynvml
import pytest

from tests.workers.test_nvml import H100, process, recorded_nvml
from workers.devices.host import HostProbe
from workers.devices.nvml import NvmlProbe
from workers.devices.registry import DeviceRegistry, Occupant
from workers.devices.sampler import attribute

GPUS = 8
GIB = 1024**3


def per_call_us(call: Callable[[], object], samples: int, repeats: int = 5) -> float:
    """The thread's CPU time for one call in µs: best of `repeats` runs (as timeit advises).

    CPU time rather than wall clock: on a shared machine, time spent waiting for a core
    is not the sampler's cost.
    """
    runs = []
    for _ in range(repeats):
        started = time.thread_time()
        for _ in range(samples):
            call()
        runs.append((time.thread_time() - started) / samples * 1e6)
    return min(runs)


def host_probe(samples: int) -> float:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        registry = DeviceRegistry()
        registry.assign(0, Occupant(attempt_id=1, rank=0, pid=os.getpid()))
        registry.assign(1, Occupant(attempt_id=1, rank=1, pid=child.pid))
        probe = HostProbe(2, registry)

        def once() -> None:
            for sample in probe.sample("bench", time.time()):
                attribute(sample, registry)

        return per_call_us(once, samples) / 2
    finally:
        child.kill()
        child.wait()


def nvml_adapter(samples: int) -> tuple[float, float]:
    gpus = [
        {
            **H100,
            "uuid": f"GPU-{i}",
            "compute": [process(os.getpid(), 9 * GIB), process(10_000 + i, GIB)],
            "graphics": [],
            "ecc_corrected": 0,
            "ecc_uncorrected": 0,
            "xid_events": None,
        }
        for i in range(GPUS)
    ]
    with pytest.MonkeyPatch.context() as patch:
        recorded_nvml(patch, gpus)
        probe = NvmlProbe.create()
        assert probe is not None
        registry = DeviceRegistry()
        for i in range(GPUS):
            registry.assign(i, Occupant(attempt_id=1, rank=i, pid=os.getpid() if i == 0 else 1))

        def adapter() -> None:
            for sample in probe.sample("bench", time.time()):
                attribute(sample, registry)

        def bare() -> None:
            for i in range(GPUS):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                pynvml.nvmlDeviceGetUtilizationRates(h)
                pynvml.nvmlDeviceGetMemoryInfo(h)
                pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
                pynvml.nvmlDeviceGetPowerUsage(h)
                pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
                for kind in (
                    pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                    pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                ):
                    pynvml.nvmlDeviceGetTotalEccErrors(h, kind, pynvml.NVML_VOLATILE_ECC)

        ours = per_call_us(adapter, samples) / GPUS
        baseline = per_call_us(bare, samples) / GPUS
        probe.shutdown()
    return ours, baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    host = host_probe(args.samples)
    ours, bare = nvml_adapter(args.samples)
    print(f"device sampling cost, CPU time, best of 5 x {args.samples} samples")
    print(f"  host probe (psutil), per CPU slot per sample            {host:8.1f} µs")
    print(f"  NVML adapter on recorded answers, per GPU per sample     {ours:8.1f} µs")
    print(f"  baseline: the same pynvml calls bare, per GPU            {bare:8.1f} µs")
    print(f"  adapter's own code, per GPU per sample                   {ours - bare:8.1f} µs")


if __name__ == "__main__":
    main()
