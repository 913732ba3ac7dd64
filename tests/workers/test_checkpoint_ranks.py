"""Under torchrun: a crafted value in one rank's shard refuses the resume on every rank, inert."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from reference import ROOT, torchrun

from workers.contract.spec import JobSpec

pytestmark = pytest.mark.slow  # starts torchrun ranks


class Exploit:
    """Unpickling this would run a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def _spec() -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "two-ranks",
            "template": "mlp",
            "parallelism": {"devices": 2},
            "hyperparameters": {"steps": 2, "batch_size": 4, "dataset_size": 64, "hidden": 8},
            "checkpoint": {"every_steps": 2},
        }
    )


def test_a_pickle_in_rank_one_shard_fails_the_resume_with_the_reason(tmp_path: Path) -> None:
    first = tmp_path / "first"
    first.mkdir()
    torchrun(_spec(), first)
    checkpoint = first / "checkpoints" / "step-2"
    doc = json.loads((checkpoint / ".metadata").read_bytes())
    entries = doc["state_dict_metadata"]
    (target,) = [
        s
        for s in doc["storage_data"]
        if s["file"] == "__1_0.distcp" and entries[s["fqn"]]["kind"] == "bytes"
    ][:1]
    marker = tmp_path / "ran"
    payload = pickle.dumps(Exploit(marker))
    shard = checkpoint / "__1_0.distcp"
    target.update(at=shard.stat().st_size, length=len(payload))
    shard.write_bytes(shard.read_bytes() + payload)
    (checkpoint / ".metadata").write_text(json.dumps(doc))

    again = tmp_path / "again"
    again.mkdir()
    (again / "resume-from").write_text(str(checkpoint))
    spec_file = again / "spec.json"
    spec_file.write_text(_spec().model_dump_json())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--standalone",
            str(Path(__file__).with_name("parallel_driver.py")),
            str(spec_file),
            str(again),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        timeout=180,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    reason = f"CheckpointRefused: checkpoint refused: the value of {target['fqn']} is a pickle"
    assert done.stderr.count(reason) == 2, done.stderr[-3000:]  # both ranks say why
    assert "CheckpointException" not in done.stderr  # the reason itself, not DCP's wrapper
    assert not marker.exists()
