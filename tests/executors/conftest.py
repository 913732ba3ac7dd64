"""A real one-host Slurm and a Trainboard stack driving it, one of each per test module.

A module that needs another shape (two hosts, other limits) defines its own `cluster` or
`stack` fixture, which takes the place of these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.executors.slurm_stack import SlurmStack, slurm_stack
from tests.job_users import open_scratch
from tests.slurm_cluster import SlurmCluster, slurm_cluster, slurm_installed

#: every module that starts Slurm: slow, and only where Slurm is installed
SLURM_TESTS = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not slurm_installed(), reason="needs slurm-wlm and munge (.ci/run installs them)"
    ),
]


def cluster_of(name: str, **options: Any) -> Callable[..., Iterator[SlurmCluster]]:
    """A module's own `cluster` fixture: a real Slurm started with these slurm_cluster
    options in a folder named after `name` (`cluster = cluster_of("slurm-x", hosts=2)`)."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
        with slurm_cluster(tmp_path_factory.mktemp(name), **options) as running:
            yield running

    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), cpus=2, kill_wait=2) as running:
        yield running


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster) -> Iterator[SlurmStack]:
    # outside pytest's tmp: a concurrent pytest session makes /tmp/pytest-of-<user> 0700
    # again, and the job user could then no longer read its run dir (seen: the rank's
    # PermissionError on spec.json)
    with open_scratch("tb-slurm-stack-") as scratch, slurm_stack(scratch, cluster) as running:
        yield running
