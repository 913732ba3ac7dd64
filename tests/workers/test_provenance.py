"""What a node records of an attempt: the script tree's hash, the checkout's commit and diff,
and what the ranks' interpreter reports about itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from tests.workers.worker_helpers import attempt_order, mlp_spec
from workers.node import provenance
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.settings import SupervisorSettings

ME = JobIdentity(uid=None, gid=None, name="me")


def _tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "model.py").write_text("W = 1\n")


def test_the_tree_hash_changes_with_any_byte_and_follows_no_link(tmp_path: Path) -> None:
    _tree(tmp_path)
    first = provenance.hash_tree(tmp_path, entrypoint="train.py")
    assert (first.files, first.complete) == (2, True)
    assert provenance.hash_tree(tmp_path, entrypoint="train.py").sha256 == first.sha256
    (tmp_path / "pkg" / "model.py").write_text("W = 2\n")
    assert provenance.hash_tree(tmp_path, entrypoint="train.py").sha256 != first.sha256
    (tmp_path / "outside").symlink_to("/etc")  # a link is hashed as its text, not followed
    linked = provenance.hash_tree(tmp_path, entrypoint="train.py")
    assert linked.files == 3 and linked.bytes == first.bytes


def test_git_commit_and_dirty_diff_of_a_checkout(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert provenance.git_state(tmp_path, ME) is None  # not a checkout
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    clean = provenance.git_state(tmp_path, ME)
    assert clean is not None and (clean.commit, clean.branch, clean.dirty, clean.diff) == (
        commit,
        "main",
        False,
        "",
    )
    (tmp_path / "train.py").write_text("print('changed')\n")
    dirty = provenance.git_state(tmp_path, ME)
    assert dirty is not None and dirty.dirty and "+print('changed')" in dirty.diff


@pytest.mark.slow  # git and an interpreter as child processes
def test_a_script_jobs_provenance_names_its_tree_and_interpreter(tmp_path: Path) -> None:
    _tree(tmp_path / "scripts")
    settings = SupervisorSettings(
        redis_url="redis://unused", data_dir=tmp_path / "data", script_roots=[tmp_path / "scripts"]
    )
    spec = mlp_spec().model_copy(update={"template": None, "entrypoint": {"script": "train.py"}})
    spec = type(spec).model_validate(
        {
            **spec.model_dump(mode="json", exclude={"template", "hyperparameters"}),
            "entrypoint": {"script": "train.py"},
        }
    )
    sent = provenance.collect(attempt_order(spec, job_id=3), settings, "n1")
    assert sent.recorded.script is not None and sent.recorded.script.entrypoint == "train.py"
    assert sent.recorded.script.root == str((tmp_path / "scripts").resolve())
    assert sent.reported is not None, sent.reported_error
    assert sent.reported.torch == torch.__version__
    assert f"torch=={torch.__version__}" in sent.reported.packages
