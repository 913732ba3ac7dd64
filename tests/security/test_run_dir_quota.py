"""A job filling its run directory is stopped at its quota, failed with the sizes named."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.job_users import open_scratch
from tests.security.script_jobs import script_order, script_settings
from workers.supervisor.attempt import Supervisor
from workers.supervisor.run_dir_quota import (
    MAX_DEPTH,
    RunDirQuota,
    TooDeep,
    disk_usage,
    size_text,
)
from workers.supervisor.settings import SupervisorSettings

QUOTA = 48 << 20
FILLER = """
import os, time
chunk = os.urandom(4 << 20)
with open(os.path.join(os.environ["TMPDIR"], "fill.bin"), "wb") as out:
    for _ in range(256):  # 1 GiB, 4 MiB at a time
        out.write(chunk)
        out.flush()
        time.sleep(0.02)
"""


@pytest.fixture
def filler_settings(redis_url: str) -> Iterator[SupervisorSettings]:
    """A supervisor's settings with a 48 MiB run-dir quota and a script that writes 1 GiB."""
    with open_scratch("tb-quota-") as scratch:
        yield script_settings(
            scratch,
            redis_url,
            {"fill.py": FILLER},
            run_dir_quota_bytes=QUOTA,
            run_dir_quota_interval=0.2,
        )


def test_sizes_are_allocated_bytes_each_inode_once_and_links_not_followed(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * (1 << 20))
    os.link(tmp_path / "data.bin", tmp_path / "again.bin")
    with open(tmp_path / "sparse.bin", "wb") as sparse:
        sparse.truncate(1 << 30)  # 1 GiB that holds nothing
    (tmp_path / "elsewhere").symlink_to("/usr")
    used = disk_usage(tmp_path)
    assert (1 << 20) <= used < (2 << 20)
    assert size_text(QUOTA) == "48.0 MiB" and size_text(512) == "512 B"


def test_a_tree_nested_too_deep_to_walk_is_over_any_quota(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(MAX_DEPTH + 1):  # made relative to a directory fd: no path gets long
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    quota = RunDirQuota(tmp_path, limit=1 << 40, interval=1.0)
    assert quota.check() == f"run dir over quota (nested deeper than {MAX_DEPTH} levels)"
    with pytest.raises(TooDeep):
        disk_usage(tmp_path)


@pytest.mark.slow  # a real rank writing to disk
def test_a_job_filling_its_run_dir_fails_at_its_quota_with_the_sizes_named(
    filler_settings: SupervisorSettings,
) -> None:
    order = script_order(9, "fill.py")
    supervisor = Supervisor(order, filler_settings)
    started = time.monotonic()
    outcome = supervisor.run()
    assert outcome.outcome == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("run dir over quota (")
    assert outcome.reason.endswith(" of 48.0 MiB)")
    assert supervisor.dirs is not None
    left = disk_usage(supervisor.dirs.job)
    assert QUOTA < left < 4 * QUOTA, size_text(left)  # stopped soon after, far from 1 GiB
    assert time.monotonic() - started < 60
