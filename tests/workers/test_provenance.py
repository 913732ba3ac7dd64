"""What a node records of an attempt: the script tree's hash, the checkout's commit and diff,
and what the ranks' interpreter reports about itself."""

from __future__ import annotations

import os
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from tests.workers.worker_helpers import attempt_order, mlp_spec
from workers.contract.provenance import MAX_DIFF_BYTES
from workers.node import provenance
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.settings import SupervisorSettings

ME = JobIdentity(uid=None, gid=None, name="me")
T = TypeVar("T")


def _tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "model.py").write_text("W = 1\n")


def _checkout(root: Path) -> None:
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
    }
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


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
    _checkout(tmp_path)
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


def _peak(work: Callable[[], T]) -> tuple[T, int, float]:
    """What work returns, the Python memory it held at its peak and the seconds it took."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


def test_a_sparse_3_gib_file_is_skipped_by_its_size_never_read(tmp_path: Path) -> None:
    """Was: read whole (the worker grew to 1.4 GiB); now: hashed by its size, named."""
    _tree(tmp_path)
    with (tmp_path / "pkg" / "weights.bin").open("wb") as sparse:
        sparse.truncate(3 << 30)
    tree, peak, seconds = _peak(lambda: provenance.hash_tree(tmp_path, entrypoint="train.py"))
    assert tree.limits == ["file 'pkg/weights.bin' skipped: 3 GiB over the 16 MiB per-file cap"]
    assert (tree.files, tree.bytes, tree.complete) == (3, 18, False)
    assert peak < 4 << 20 and seconds < 2
    (tmp_path / "pkg" / "weights.bin").unlink()
    with (tmp_path / "pkg" / "weights.bin").open("wb") as sparse:
        sparse.truncate((3 << 30) + 1)  # another size: another hash
    assert provenance.hash_tree(tmp_path, entrypoint="train.py").sha256 != tree.sha256


def test_files_are_hashed_in_chunks_and_the_caps_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data.bin").write_bytes(os.urandom(12 << 20))  # under the per-file cap
    tree, peak, _ = _peak(lambda: provenance.hash_tree(tmp_path, entrypoint="x"))
    assert (tree.bytes, tree.complete, tree.limits) == (12 << 20, True, [])
    assert peak < 4 << 20  # read 1 MiB at a time, never whole
    for i in range(30):
        (tmp_path / f"f{i:02}.txt").write_text("x" * 100)
    monkeypatch.setattr(provenance, "MAX_FILE_BYTES", 10)
    skipped = provenance.hash_tree(tmp_path, entrypoint="x").limits
    assert len(skipped) == 20 and skipped[0] == (
        "file 'data.bin' skipped: 12 MiB over the 10 bytes per-file cap"
    )
    assert skipped[-1] == "12 more files skipped over the cap"
    monkeypatch.setattr(provenance, "MAX_FILE_BYTES", 16 << 20)
    (tmp_path / "data.bin").unlink()
    monkeypatch.setattr(provenance, "MAX_TREE_BYTES", 1000)
    cut = provenance.hash_tree(tmp_path, entrypoint="x")
    assert cut.limits == ["stopped at 'f10.txt': 1000 bytes read, the cap is 1000 bytes in all"]
    assert (cut.bytes, cut.complete) == (1000, False)
    monkeypatch.setattr(provenance, "MAX_TREE_FILES", 5)
    listed = provenance.hash_tree(tmp_path, entrypoint="x")
    assert listed.limits[0] == "listing stopped at 5 entries (the cap)" and listed.files <= 5


def test_a_fifo_in_the_tree_is_not_opened_for_reading(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.mkfifo(tmp_path / "pipe")  # opened (non-blocking) it would be read forever
    tree = provenance.hash_tree(tmp_path, entrypoint="train.py")
    assert (tree.files, tree.complete) == (3, True)


def test_the_diff_is_read_up_to_its_cap_then_git_is_ended(tmp_path: Path) -> None:
    """Was: the whole `git diff` read, then cut; now at most the cap is ever held."""
    _tree(tmp_path)
    _checkout(tmp_path)
    lines = "".join(f"changed line {i} {'y' * 60}\n" for i in range(120_000))  # ~9 MiB diff
    (tmp_path / "train.py").write_text(lines)
    state, peak, _ = _peak(lambda: provenance.git_state(tmp_path, ME))
    assert state is not None and state.dirty and state.diff_truncated
    assert state.diff.startswith("diff --git a/train.py b/train.py")
    assert len(state.diff.encode()) == MAX_DIFF_BYTES
    assert state.diff_note == "diff truncated at 64 KiB (the cap)"
    assert peak < 2 << 20


def test_a_step_that_prints_without_end_is_cut_at_its_cap(tmp_path: Path) -> None:
    (done, cut), peak, seconds = _peak(
        lambda: provenance._as_job_user(ME, ["yes"], cwd=tmp_path, env={}, limit=1 << 20)
    )
    assert cut and len(done.stdout) == 1 << 20 and done.stdout.startswith("y\ny\n")
    assert peak < 8 << 20 and seconds < 10
