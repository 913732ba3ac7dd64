"""A rendezvous port taken after it was chosen: rank 0's store cannot listen, a platform fault."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from worker_helpers import two_rank_env


def test_a_taken_port_fails_the_rendezvous_at_once_naming_the_port(tmp_path: Path) -> None:
    from workers.rank.engine import distributed
    from workers.rank.engine.errors import RendezvousFailed

    with socket.socket() as taken:  # someone else listens there now
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = two_rank_env(tmp_path, rank=0, master_port=port, local=2)
        began = time.monotonic()
        with pytest.raises(RendezvousFailed) as failed:
            distributed.setup(env, rendezvous_timeout_s=30)
    assert time.monotonic() - began < 25  # not the whole bound: a bind fails at once
    assert failed.value.reason.startswith(f"rendezvous failed: port {port} was taken")
    assert failed.value.platform_fault  # restarted without spending max_restarts
