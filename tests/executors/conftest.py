"""A real one-host Slurm and a Trainboard stack driving it, one of each per test module.

A module that needs another shape (two hosts, other limits) defines its own `cluster` or
`stack` fixture, which takes the place of these.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.executors.slurm_stack import SlurmStack, slurm_stack
from tests.slurm_cluster import SlurmCluster, slurm_cluster, slurm_installed

#: every module that starts Slurm: slow, and only where Slurm is installed
SLURM_TESTS = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not slurm_installed(), reason="needs slurm-wlm and munge (.ci/run installs them)"
    ),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), cpus=2, kill_wait=2) as running:
        yield running


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, cluster: SlurmCluster) -> Iterator[SlurmStack]:
    with slurm_stack(tmp_path_factory.mktemp("stack"), cluster) as running:
        yield running
