"""A job that swaps its own checkpoint directory for a symlink to another job's, in a loop
(renameat2 RENAME_EXCHANGE, atomic), while its owner lists and downloads: the owner sees
only the owner's checkpoints, or a clean 404/409/422, never the other job's and never a 500."""

from __future__ import annotations

import ctypes
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from backend.checkpoint import service
from backend.checkpoint.consolidate import copy_plain_files
from backend.config import Settings
from backend.db import Database
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.nodes.models import Device, Node
from tests.backend.conftest import bearer, job_row
from tests.small_checkpoints import small_checkpoints
from workers.contract import run_layout

pytestmark = pytest.mark.skipif(
    os.uname().machine != "x86_64" or os.uname().sysname != "Linux",
    reason="renameat2 by its x86_64 syscall number",
)

SYS_RENAMEAT2 = 316
RENAME_EXCHANGE = 2
AT_FDCWD = -100
CLEAN_REFUSALS = {404, 409, 422}
LISTINGS = 300
DOWNLOADS = 24
COPIES = 300


@dataclass(frozen=True)
class TwoJobs:
    attacker: int  # alice's job: its checkpoints/attempt-1 is what it swaps
    victim: int  # bob's job: the weights alice must never get
    attacker_dir: Path
    victim_dir: Path
    attacker_sizes: set[int]


def _on_node(database: Database, job_id: int) -> None:
    with database.session() as session:
        attempt = Attempt(job_id=job_id, number=1, node_name="n1", devices=[0], master_port=1)
        session.add(attempt)
        session.flush()
        session.add(AttemptSlice(attempt_id=attempt.id, node_name="n1", node_rank=0, devices=[0]))
        session.commit()


@pytest.fixture
def two_jobs(database: Database, settings: Settings, two_users: dict[str, str]) -> TwoJobs:
    """Alice's job with a checkpoint at step 10; bob's with steps 10 and 20 of a bigger,
    differently seeded model, on the same node."""
    data_dir = settings.data_dir / "node"
    with database.session() as session:
        node = Node(name="n1", hostname="h", address="127.0.0.1", data_dir=str(data_dir))
        session.add(node)
        session.flush()
        session.add(Device(node_id=node.id, index=0, kind="cpu", name="cpu slot 0"))
        session.commit()
    attacker = job_row(database, owner="alice", name="attacker")
    victim = job_row(database, owner="bob", name="victim")
    for job in (attacker, victim):
        _on_node(database, job)
    attacker_dir = run_layout.checkpoint_dir(data_dir, attacker, 1)
    victim_dir = run_layout.checkpoint_dir(data_dir, victim, 1)
    small_checkpoints(attacker_dir, (10,), seed=0, hidden=8)
    small_checkpoints(victim_dir, (10, 20), seed=1, hidden=32)
    sizes = {sum(f.stat().st_size for f in (attacker_dir / "step-10").iterdir())}
    return TwoJobs(attacker, victim, attacker_dir, victim_dir, sizes)


@contextmanager
def swapping(real: Path, other: Path) -> Iterator[Counter[str]]:
    """While inside: a thread exchanges `real` with a symlink to `other`, atomically, in a loop
    (what a job's rank can do to its own checkpoints/attempt-<n>); `real` is back on exit."""
    link = real.with_name(real.name + ".swap")
    os.symlink(other, link)
    libc = ctypes.CDLL(None, use_errno=True)
    names = (os.fsencode(real), os.fsencode(link))
    done = threading.Event()
    swaps: Counter[str] = Counter()

    def exchange() -> None:
        if libc.syscall(SYS_RENAMEAT2, AT_FDCWD, names[0], AT_FDCWD, names[1], RENAME_EXCHANGE):
            raise OSError(ctypes.get_errno(), "renameat2")
        swaps["done"] += 1

    def loop() -> None:
        while not done.is_set():
            exchange()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        done.set()
        thread.join()
        if real.is_symlink():
            exchange()
        link.unlink()


def test_the_listing_under_a_swap_loop_shows_the_owners_checkpoints_only(
    api: TestClient, two_users: dict[str, str], two_jobs: TwoJobs
) -> None:
    alice = bearer(two_users["alice"])
    api = TestClient(api.app, raise_server_exceptions=False)  # a 500 is an answer here
    outcomes: Counter[str] = Counter()
    with swapping(two_jobs.attacker_dir, two_jobs.victim_dir) as swaps:
        for _ in range(LISTINGS):
            response = api.get(f"/api/jobs/{two_jobs.attacker}/checkpoints", headers=alice)
            if response.status_code != 200:
                outcomes[f"status {response.status_code}"] += 1
                continue
            listed = [(c["step"], c["size_bytes"]) for c in response.json()["checkpoints"]]
            own = all(step == 10 and size in two_jobs.attacker_sizes for step, size in listed)
            outcomes["own" if own and listed else "victim's" if listed else "empty"] += 1
    print(f"{LISTINGS} listings under {swaps['done']} swaps: {dict(outcomes)}")
    assert swaps["done"] > LISTINGS  # the attacker really raced every listing
    assert outcomes["victim's"] == 0 and set(outcomes) <= {"own", "empty"}, outcomes


def test_a_step_read_under_a_swap_loop_is_the_owners_own(
    database: Database, two_jobs: TwoJobs, tmp_path: Path
) -> None:
    """What a download reads of the job's dir (the child reads only this copy), many times."""
    own = {f.name: f.read_bytes() for f in (two_jobs.attacker_dir / "step-10").iterdir()}
    outcomes: Counter[str] = Counter()
    with database.session() as session, swapping(two_jobs.attacker_dir, two_jobs.victim_dir):
        job = session.get_one(Job, two_jobs.attacker)
        for i in range(COPIES):
            target = tmp_path / str(i)
            target.mkdir()
            try:
                with service.open_step(session, job=job, step=10) as (checkpoint, step_fd):
                    copy_plain_files(step_fd, target, max_bytes=1 << 30)
            except service.CheckpointNotFound:
                outcomes["not found"] += 1
                continue
            got = {f.name: f.read_bytes() for f in target.iterdir()}
            outcomes["own" if got == own and checkpoint.step == 10 else "victim's"] += 1
    print(f"{COPIES} reads: {dict(outcomes)}")
    assert outcomes["victim's"] == 0 and outcomes["own"] > 0, outcomes


@pytest.mark.slow  # each download reads the checkpoint in a child process (~3 s)
def test_downloads_under_a_swap_loop_get_the_owners_weights_or_a_clean_refusal(
    api: TestClient, two_users: dict[str, str], two_jobs: TwoJobs, tmp_path: Path
) -> None:
    alice = bearer(two_users["alice"])
    api = TestClient(api.app, raise_server_exceptions=False)  # a 500 is an answer here
    own = torch.load(_download(api, two_jobs.attacker, alice, tmp_path), weights_only=True)
    outcomes: Counter[str] = Counter()
    with swapping(two_jobs.attacker_dir, two_jobs.victim_dir) as swaps:
        for _ in range(DOWNLOADS):
            response = api.get(
                f"/api/jobs/{two_jobs.attacker}/checkpoints/10/download", headers=alice
            )
            if response.status_code != 200:
                outcomes[f"status {response.status_code}"] += 1
                continue
            (tmp_path / "got.pt").write_bytes(response.content)
            got = torch.load(tmp_path / "got.pt", weights_only=True)
            same = got.keys() == own.keys() and all(torch.equal(got[k], own[k]) for k in own)
            outcomes["own" if same else "victim's"] += 1
    print(f"{DOWNLOADS} downloads under {swaps['done']} swaps: {dict(outcomes)}")
    assert outcomes["victim's"] == 0, outcomes
    assert set(outcomes) <= {"own"} | {f"status {s}" for s in CLEAN_REFUSALS}, outcomes


def _download(api: TestClient, job: int, headers: dict[str, str], tmp_path: Path) -> Path:
    response = api.get(f"/api/jobs/{job}/checkpoints/10/download", headers=headers)
    assert response.status_code == 200, response.text
    path = tmp_path / "own.pt"
    path.write_bytes(response.content)
    return path
