"""Files inside a job's directories are opened from the runs root down, by descriptor, with
no component followed: a link anywhere below the runs root is refused, never read through."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from workers.contract.run_files import (
    UnsafeRunPath,
    file_stat,
    open_file,
    read_file,
    regular_files,
    run_dir,
    subdirectories,
)
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.run_dirs import read_job_file

PARTS = ["job-1", "checkpoints", "attempt-1", "step-5"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A runs root with job 1's step-5 checkpoint (a shard), and job 2's secret next to it."""
    step = tmp_path.joinpath("runs", *PARTS)
    step.mkdir(parents=True)
    (step / "__0_0.distcp").write_bytes(b"own")
    secret = tmp_path / "runs" / "job-2" / "checkpoints" / "attempt-1" / "step-5"
    secret.mkdir(parents=True)
    (secret / "__0_0.distcp").write_bytes(b"another job's")
    return tmp_path


def test_a_plain_tree_is_walked_and_read(data_dir: Path) -> None:
    with run_dir(data_dir, PARTS) as fd:
        assert read_file(fd, "__0_0.distcp", max_bytes=10) == b"own"
        assert regular_files(fd) == {"__0_0.distcp": 3}
    with run_dir(data_dir, PARTS[:3]) as fd:
        assert subdirectories(fd) == ["step-5"]


@pytest.mark.parametrize("depth", range(1, len(PARTS) + 1))
def test_a_link_at_any_depth_is_refused(data_dir: Path, depth: int) -> None:
    real = data_dir.joinpath("runs", *PARTS[:depth])
    other = data_dir.joinpath("runs", "job-2", *PARTS[1:depth])
    real.rename(real.with_name("moved"))
    real.symlink_to(other if depth > 1 else data_dir / "runs" / "job-2")
    with pytest.raises(UnsafeRunPath), run_dir(data_dir, PARTS):
        pass


def test_files_that_are_links_fifos_or_too_large_are_not_read(data_dir: Path) -> None:
    step = data_dir.joinpath("runs", *PARTS)
    (step / "link").symlink_to(step / "__0_0.distcp")
    os.mkfifo(step / "fifo")  # opening it for reading must not wait for a writer
    with run_dir(data_dir, PARTS) as fd:
        for name in ("link", "fifo", "..", "a/b", "missing"):
            with pytest.raises(UnsafeRunPath):
                os.close(open_file(fd, name))
            assert file_stat(fd, name) is None
        assert set(regular_files(fd)) == {"__0_0.distcp"}
        with pytest.raises(UnsafeRunPath, match="larger than"):
            read_file(fd, "__0_0.distcp", max_bytes=2)


def test_the_supervisor_reads_a_rank_file_only_through_plain_directories(
    data_dir: Path,
) -> None:
    me = JobIdentity(uid=None, gid=None, name="root")
    attempt = data_dir / "runs" / "job-1" / "attempt-1"
    attempt.mkdir()
    (attempt / "rank-0.failure").write_text("own reason")
    assert read_job_file(attempt / "rank-0.failure", me) == "own reason"
    other = data_dir / "runs" / "job-2" / "attempt-1"
    other.mkdir()
    (other / "rank-0.failure").write_text("another job's reason")
    attempt.rename(attempt.with_name("attempt-1.real"))
    attempt.symlink_to(other)  # the job swapped its attempt dir for a link
    assert read_job_file(attempt / "rank-0.failure", me) is None


def test_files_deleted_while_listed_are_left_out_not_an_error(tmp_path: Path) -> None:
    """A job prunes its old checkpoints (keep_last) while the API lists or sizes them: a file
    gone between the directory scan and its stat is not there (CI: a 500 FileNotFoundError
    '__1_0.distcp' on a listing)."""
    churn = tmp_path / "step-1"
    churn.mkdir()
    stop = threading.Event()

    def prune() -> None:
        while not stop.is_set():
            for i in range(64):
                (churn / f"__{i}_0.distcp").write_bytes(b"x")
            for i in range(64):
                (churn / f"__{i}_0.distcp").unlink()

    pruner = threading.Thread(target=prune)
    pruner.start()
    fd = os.open(churn, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(3000):
            assert set(regular_files(fd).values()) <= {0, 1}  # (0: being written)
    finally:
        stop.set()
        pruner.join()
        os.close(fd)
