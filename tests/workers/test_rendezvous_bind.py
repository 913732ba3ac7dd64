"""A rendezvous port taken after it was chosen: rank 0's store cannot listen, a platform fault."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from workers.contract.rank_env import RankEnv


def test_a_taken_port_fails_the_rendezvous_at_once_naming_the_port(tmp_path: Path) -> None:
    from workers.rank.engine import distributed
    from workers.rank.engine.errors import RendezvousFailed

    with socket.socket() as taken:  # someone else listens there now
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = RankEnv(
            rank=0, local_rank=0, world_size=2, local_world_size=2, group_rank=0,
            master_addr="127.0.0.1", master_port=port, run_id="r", attempt_id=1, job_id=1,
            spec_file=tmp_path / "spec.json", run_dir=tmp_path, checkpoint_dir=tmp_path,
        )  # fmt: skip
        began = time.monotonic()
        with pytest.raises(RendezvousFailed) as failed:
            distributed.setup(env, rendezvous_timeout_s=30)
    assert time.monotonic() - began < 25  # not the whole bound: a bind fails at once
    assert failed.value.reason.startswith(f"rendezvous failed: port {port} was taken")
    assert failed.value.platform_fault  # restarted without spending max_restarts
