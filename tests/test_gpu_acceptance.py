"""The GPU acceptance script's dry run, as CI runs it: the whole sequence on CPU slots.

It starts a real `trainboard up`, trains real jobs through the API and reads the real
websocket and /metrics; what needs a GPU must come out "skipped: no GPU", never passed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_dry_run_passes_and_skips_only_what_needs_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "acceptance"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_acceptance.py", "--dry-run", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    verdict = json.loads((out / "verdict.json").read_text())
    failed = [c for c in verdict["checks"] if c["status"] == "failed"]
    why = "\n".join(f"{c['name']}: {c.get('detail')}" for c in failed)  # whole, not cut
    assert done.returncode == 0 and verdict["passed"], (
        f"{why}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert verdict["mode"] == "dry-run"
    checks = {c["name"]: c for c in verdict["checks"]}

    ended = {job["name"]: job["state"] for job in verdict["jobs"]}
    for name in ("mlp-data-1", "cnn-data-1", "gpt-data-1", "mlp-bf16", "mlp-data-2",
                 "mlp-model-2", "mlp-hybrid-4", "mlp-pause-resume"):  # fmt: skip
        assert ended[name] == "succeeded", ended
        if name != "mlp-pause-resume":
            assert checks[f"job {name}: loss falls"]["status"] == "passed"
    assert ended["mlp-cancel"] == "cancelled"
    assert "fp16 needs a CUDA GPU" in checks["job mlp-fp16-gradscaler ends failed"]["detail"]
    assert checks["cluster: 4 CPU slots registered as kind cpu, named 'CPU slot N'"]["status"] == (
        "passed"
    )

    gpu_only = [c for c in verdict["checks"] if "GPU" in c["name"] or "NVML" in c["name"]]
    gpu_only = [c for c in gpu_only if not c["name"].startswith("job ")]
    assert gpu_only and all(c["status"] == "skipped" for c in gpu_only), gpu_only
    assert all(c["detail"].startswith("skipped: no GPU") for c in gpu_only)
    assert verdict["counts"]["skipped"] == len(
        [c for c in verdict["checks"] if c["status"] == "skipped"]
    )
    table = (out / "verdict.md").read_text()
    assert table.startswith("**PASSED** (dry-run)") and "| skipped | skipped: no GPU" in table
    assert verdict["overhead"]["pairs"] == 1
