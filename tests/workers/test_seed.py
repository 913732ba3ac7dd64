"""A clone's first attempt resumes from its own copy of the parent's checkpoint, made by the
supervisor without following any link the parent's ranks planted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.workers.worker_helpers import attempt_order, mlp_spec
from workers.contract import run_layout
from workers.supervisor import seed
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.run_dirs import UnsafeRunDir, prepare

ME = JobIdentity(uid=None, gid=None, name="me")


def _parent_step(data_dir: Path) -> Path:
    step = run_layout.checkpoint_dir(data_dir, 1, 2) / "step-20"
    step.mkdir(parents=True)
    (step / ".metadata").write_text("{}")
    (step / "__0_0.distcp").write_bytes(b"weights")
    return step


def test_another_jobs_checkpoint_is_copied_into_this_jobs_own_dir(tmp_path: Path) -> None:
    source = _parent_step(tmp_path)
    os.symlink("/etc/passwd", source / "__1_0.distcp")  # planted: never copied
    prepare(tmp_path, 7, 1, ME)
    order = attempt_order(mlp_spec(), job_id=7, resume_from=str(source))
    adopted = seed.adopt(order, tmp_path, ME)
    copy = run_layout.checkpoint_root(tmp_path, 7) / "seed" / "step-20"
    assert adopted.resume_from == str(copy)
    assert sorted(p.name for p in copy.iterdir()) == [".metadata", "__0_0.distcp"]
    assert (copy / "__0_0.distcp").read_bytes() == b"weights"
    assert seed.adopt(adopted, tmp_path, ME) == adopted  # its own checkpoint: left as it is


def test_a_link_on_the_way_to_the_parents_checkpoint_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "step-20"
    elsewhere.mkdir(parents=True)
    root = run_layout.checkpoint_root(tmp_path, 1)
    root.mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", root / "attempt-1")
    prepare(tmp_path, 7, 1, ME)
    order = attempt_order(mlp_spec(), job_id=7, resume_from=str(root / "attempt-1" / "step-20"))
    with pytest.raises(UnsafeRunDir, match="not a plain directory"):
        seed.adopt(order, tmp_path, ME)


@pytest.mark.parametrize(
    "where", ["/etc", "runs/job-1/home/step-1", "runs/job-1/checkpoints/attempt-1/step-1/.."]
)
def test_anything_but_a_jobs_step_dir_is_refused(tmp_path: Path, where: str) -> None:
    prepare(tmp_path, 7, 1, ME)
    path = where if where.startswith("/") else str(tmp_path / where)
    with pytest.raises(UnsafeRunDir, match="not a job's checkpoint"):
        seed.adopt(attempt_order(mlp_spec(), job_id=7, resume_from=path), tmp_path, ME)
