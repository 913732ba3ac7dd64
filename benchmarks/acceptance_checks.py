"""Checks on what the browser saw (websocket device samples) and what a scraper reads (/metrics)."""

from __future__ import annotations

from typing import Any

from benchmarks.acceptance_verdict import Verdict
from benchmarks.acceptance_watch import CPU_GAUGES, DCGM_GAUGES, GPU_FIELDS, Watcher, cadence

NO_GPU = "no GPU (CPU slots have no NVML)"
Polls = list[dict[str, list[tuple[dict[str, str], float]]]]


def check_node(verdict: Verdict, watcher: Watcher, *, gpu: bool, devices: int) -> None:
    """The local worker registered this machine's devices, labelled for what they are."""
    found = watcher.devices()
    kinds = sorted({d["kind"] for d in found})
    names = sorted({d["name"] for d in found})
    if gpu:
        ok = len(found) == devices and kinds == ["gpu"] and all(d.get("uuid") for d in found)
        what = f"{devices} GPUs registered with NVML name and UUID"
    else:
        expected = {f"CPU slot {i}" for i in range(devices)}
        ok = len(found) == devices and kinds == ["cpu"] and set(names) == expected
        what = f"{devices} CPU slots registered as kind cpu, named 'CPU slot N'"
    verdict.check(f"cluster: {what}", ok, f"{len(found)} devices, kinds {kinds}, names {names}")


def check_devices(verdict: Verdict, watcher: Watcher, *, gpu: bool, interval: float) -> None:
    """Samples reached the websocket at the sampling interval, with the fields NVML gives."""
    kind = "gpu" if gpu else "cpu"
    samples = [a.sample for a in watcher.arrivals]
    mine = [s for s in samples if s["kind"] == kind]
    verdict.check(
        f"websocket: live device samples are all kind {kind}",
        bool(mine) and len(mine) == len(samples),
        f"{len(samples)} samples, {len(mine)} of kind {kind}",
    )
    timing = cadence(watcher.arrivals)
    for (_node, device), t in sorted(timing.items()):
        verdict.check(
            f"websocket: {kind} {device} samples arrive every ~{interval:g} s",
            t["samples"] >= 5
            and 0.5 * interval <= t["median_s"] <= 1.5 * interval
            and t["p95_s"] <= 3 * interval,
            f"{t['samples']:.0f} samples; between arrivals median {t['median_s']:.2f} s, "
            f"p95 {t['p95_s']:.2f} s",
        )
    if not timing:
        verdict.fail("websocket: device samples arrive at the interval", "no device samples")
    busy = [s for s in mine if s.get("attempt_id") is not None and (s.get("util") or 0) > 0]
    verdict.check(
        f"websocket: a {kind} sample attributed to a running rank shows its util and memory",
        any((s.get("mem_used") or 0) > 0 for s in busy),
        f"{len(busy)} busy attributed samples of {len(mine)}",
    )
    if not gpu:
        leaked = [s for s in mine if s.get("temperature") is not None or s.get("power") is not None]
        verdict.check(
            "websocket: CPU slots claim no temperature or power", not leaked, f"{len(leaked)} did"
        )
        for name in ("util, memory, temperature, power", "processes attributed to ranks"):
            verdict.skip(f"websocket: NVML {name} per GPU", NO_GPU)
        return
    _gpu_fields(verdict, mine)


def _gpu_fields(verdict: Verdict, samples: list[dict[str, Any]]) -> None:
    for device in sorted({s["device"] for s in samples}):
        own = [s for s in samples if s["device"] == device]
        missing = {f: sum(s.get(f) is None for s in own) for f in GPU_FIELDS}
        verdict.check(
            f"websocket: GPU {device} samples carry util, memory, temperature and power",
            not any(missing.values()),
            f"{len(own)} samples; null counts {missing}; max util "
            f"{max((s.get('util') or 0) for s in own):.0f} %",
        )
        listed = [p for s in own for p in (s.get("processes") or ())]
        owned = [p for p in listed if p.get("attempt_id") is not None and p.get("rank") is not None]
        verdict.check(
            f"websocket: GPU {device} processes are listed and attributed to ranks",
            bool(owned),
            f"{len(listed)} process entries, {len(owned)} attributed to an attempt and rank",
        )


def check_metrics(verdict: Verdict, polls: Polls, watcher: Watcher, *, gpu: bool) -> None:
    """`/metrics` has a gauge per device with values, and counts the jobs by state."""
    devices = {str(d["index"]) for d in watcher.devices()}
    if not polls:
        verdict.fail("/metrics read", "never read")
        return
    if gpu:
        for name in DCGM_GAUGES:
            _gauge(verdict, polls, name, "gpu", devices)
        for name in CPU_GAUGES:
            verdict.check(f"/metrics: no {name} on a GPU node", not polls[-1].get(name))
    else:
        for name in CPU_GAUGES:
            _gauge(verdict, polls, name, "slot", devices)
        verdict.skip("/metrics: DCGM_FI_DEV_* gauges per GPU", NO_GPU)
    last = {labels["state"]: value for labels, value in polls[-1].get("trainboard_jobs", ())}
    expected: dict[str, int] = {}
    for job in verdict.jobs:
        expected[job["state"]] = expected.get(job["state"], 0) + 1
    verdict.check(
        "/metrics: trainboard_jobs counts the run's jobs by state",
        all(last.get(state, 0) >= count for state, count in expected.items()),
        f"gauge {last}; this run recorded {expected}",
    )


def _gauge(verdict: Verdict, polls: Polls, name: str, label: str, devices: set[str]) -> None:
    """Every device has a value in every read; some read shows a busy device (util > 0)."""
    per_read = [{labels.get(label): v for labels, v in poll.get(name, ())} for poll in polls]
    complete = all(set(read) >= devices for read in per_read)
    peak = max((max(read.values(), default=0.0) for read in per_read), default=0.0)
    verdict.check(
        f"/metrics: {name} for every device, with values",
        complete and peak > 0,
        f"{len(per_read)} reads; devices {sorted(devices)}; highest value {peak:g}",
    )
