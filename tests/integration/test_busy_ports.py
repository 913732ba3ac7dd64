"""Jobs start on their first attempt while torchrun's usual ports are all taken (#17).

Listeners hold 29500–29600 (torchrun's default and the scheduler's old 29500 + attempt id)
on the host, and in each simulated host of the two-host case: a gang's rendezvous port is
chosen free by the node of rank 0 when it claims, so nothing fails at rendezvous and no
restart happens, platform fault or not.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.netns import InHost
from tests.integration.two_host_cluster import two_host_cluster
from tests.stack import trainboard_up

pytestmark = pytest.mark.slow

BUSY = range(29500, 29601)


@contextlib.contextmanager
def held_ports() -> Iterator[list[int]]:
    """Listen on every free port of BUSY (one already taken is held by someone else)."""
    sockets, held = [], []
    try:
        for port in BUSY:
            sock = socket.socket()
            try:
                sock.bind(("0.0.0.0", port))
                sock.listen()
            except OSError as err:
                sock.close()
                assert err.errno == errno.EADDRINUSE, err
                continue
            sockets.append(sock)
            held.append(port)
        yield held
    finally:
        for sock in sockets:
            sock.close()


def _ports_in(host_thread: InHost, stack: contextlib.ExitStack) -> list[int]:
    """Hold BUSY inside a simulated host's network namespace (from its thread)."""
    return host_thread(lambda: stack.enter_context(held_ports()))


def test_a_two_rank_job_starts_on_its_first_attempt_with_29500_to_29600_taken(
    tmp_path: Path,
) -> None:
    spec = {
        "name": "busy-host",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2},
        "hyperparameters": {"steps": 20, "batch_size": 16},
    }
    with held_ports() as held, trainboard_up(tmp_path, cpu_slots=2) as stack:
        assert len(held) > 90  # almost all free before: the test holds them now
        with stack.client() as client:
            job_id = client.post("/api/jobs", json=spec).json()["id"]
            job = stack.wait_job(client, job_id, "succeeded", "failed", "restarting", timeout=240)
            attempts = client.get(f"/api/jobs/{job_id}/attempts").json()
        assert job["state"] == "succeeded", job["reason"]
        assert (job["attempt"], job["restarts"], len(attempts)) == (1, 0, 1)
        port = stack_port(stack.database_url, attempts[0]["id"])
        assert port and port not in BUSY


def stack_port(database_url: str, attempt_id: int) -> int:
    """The rendezvous port recorded for an attempt (chosen at its claim)."""
    import sqlalchemy as sa

    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        port = conn.execute(
            sa.text("SELECT master_port FROM attempts WHERE id = :id"), {"id": attempt_id}
        ).scalar_one()
    engine.dispose()
    return int(port)


def test_a_two_node_job_starts_on_its_first_attempt_with_29500_to_29600_taken_on_both_hosts(
    tmp_path: Path,
) -> None:
    with two_host_cluster(tmp_path) as hosts, contextlib.ExitStack() as holding:
        hosts.start_worker("n2", hosts.b, hosts.data_dir)
        on_b = InHost(hosts.b)
        holding.callback(on_b.close)
        held_a, held_b = _ports_in(hosts.client, holding), _ports_in(on_b, holding)
        assert len(held_a) == len(held_b) == len(BUSY)  # private namespaces: all were free
        job_id = hosts.submit("busy-hosts", steps=10, strategy="data", devices=2, nodes=2)
        job = hosts.wait_state(job_id, "succeeded", "failed", "restarting", timeout=240)
        assert job["state"] == "succeeded", job["reason"]
        assert sorted(p["node"] for p in job["placement"]) == ["local", "n2"]
        assert (job["attempt"], job["restarts"]) == (1, 0)
        rows = hosts.sql("SELECT master_port FROM attempts WHERE job_id = :job", job=job_id)
        assert len(rows) == 1 and rows[0][0] and rows[0][0] not in BUSY
