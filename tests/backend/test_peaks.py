"""Peak FLOPS by device name (NVML's spellings), and no peak for CPU slots or unknown GPUs."""

from __future__ import annotations

import pytest

from backend.health.peaks import peak_flops, peak_of


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ],
)
def test_nvml_names_find_their_row(name: str, model: str) -> None:
    peak = peak_of(name)
    assert peak is not None and peak.model == model


def test_the_precision_picks_the_tensor_core_or_the_fp32_peak() -> None:
    assert peak_flops("NVIDIA H100 80GB HBM3", "gpu", "bf16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA H100 80GB HBM3", "gpu", "fp16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA A100-SXM4-40GB", "gpu", "fp32") == pytest.approx(19.5e12)


def test_cpu_slots_and_unknown_gpus_have_no_peak() -> None:
    assert peak_flops("CPU slot 0", "cpu", "fp32") is None
    assert peak_flops("NVIDIA H100 80GB HBM3", "cpu", "bf16") is None  # the kind decides
    assert peak_flops("NVIDIA RTX PRO 9000 Imaginary", "gpu", "bf16") is None
    assert peak_of("NVIDIA L40") is None  # not an L4, not an L40S
