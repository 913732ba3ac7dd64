"""Peak FLOPS of known GPUs by device name (dense, no sparsity), for MFU. CPU slots have none.

Vendor datasheet figures in TFLOPS: `matmul` is the 16-bit tensor-core peak with fp32
accumulation (what bf16/fp16 autocast runs on), `fp32` the plain fp32 peak (PyTorch leaves
TF32 matmuls off by default, so an fp32 run is measured against it). A device whose name
matches no row has no peak: its MFU is shown as none, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    model: str
    matmul_tflops: float  # bf16/fp16 dense
    fp32_tflops: float


#: first match wins: the more specific names come first (H100 PCIe before H100, L40S before L4)
PEAKS: tuple[tuple[re.Pattern[str], Peak], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), peak)
    for pattern, peak in (
        (r"H100.*PCIe", Peak("H100 PCIe", 756.0, 51.2)),
        (r"H100.*NVL", Peak("H100 NVL", 835.0, 60.0)),
        (r"H100", Peak("H100 SXM", 989.4, 66.9)),
        (r"H200", Peak("H200", 989.4, 66.9)),
        (r"A100", Peak("A100", 312.0, 19.5)),
        (r"L40S", Peak("L40S", 362.05, 91.6)),
        (r"\bL4\b", Peak("L4", 121.0, 30.3)),
        (r"V100", Peak("V100", 125.0, 15.7)),
        (r"\bT4\b", Peak("T4", 65.0, 8.1)),
        (r"RTX 4090", Peak("RTX 4090", 165.2, 82.6)),
        (r"RTX 3090", Peak("RTX 3090", 71.0, 35.6)),
    )
)


def peak_of(name: str) -> Peak | None:
    """The table's row for a device name as NVML reports it, or None when unknown."""
    return next((peak for pattern, peak in PEAKS if pattern.search(name)), None)


def peak_flops(name: str, kind: str, precision: str) -> float | None:
    """FLOP/s one device can do at most for this precision; None for CPU slots and unknowns."""
    if kind != "gpu":
        return None
    peak = peak_of(name)
    if peak is None:
        return None
    tflops = peak.fp32_tflops if precision == "fp32" else peak.matmul_tflops
    return tflops * 1e12
