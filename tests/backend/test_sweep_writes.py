"""One writer of sweeps at a time across processes on one SQLite file (backend/sweeps/writes.py):
`trainboard up` judges trials in its ingest process while the API's loop judges and launches."""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url

from backend.sweeps.writes import SweepWrites


def _hold(url: str, holding: Any, release: Any) -> None:
    with SweepWrites().held(make_url(url)):
        holding.set()
        release.wait(60)


def _taken_elsewhere(lock_path: Path) -> bool:
    """Whether another open file holds the lock now (asked without waiting)."""
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def test_a_writer_in_another_process_holds_the_databases_sweep_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trainboard.db'}"
    lock_path = tmp_path / "trainboard.db-sweeps.lock"
    context = mp.get_context("spawn")
    holding, release = context.Event(), context.Event()
    other = context.Process(target=_hold, args=(url, holding, release))
    other.start()
    try:
        assert holding.wait(60)
        assert _taken_elsewhere(lock_path)  # the API's writers would wait here
    finally:
        release.set()
        other.join(30)
    assert other.exitcode == 0
    assert not _taken_elsewhere(lock_path)  # let go with its holder's last hold


def test_the_lock_is_reentrant_and_held_until_the_outermost_hold_ends(tmp_path: Path) -> None:
    url = make_url(f"sqlite:///{tmp_path / 'trainboard.db'}")
    lock_path = tmp_path / "trainboard.db-sweeps.lock"
    writes = SweepWrites()
    with writes.held(url):
        with writes.held(url):  # the loop launches while it holds it
            assert _taken_elsewhere(lock_path)
        assert _taken_elsewhere(lock_path)
    assert not _taken_elsewhere(lock_path)


@pytest.mark.parametrize("url", ["sqlite://", "postgresql+psycopg://u@127.0.0.1/db"])
def test_no_lock_file_where_there_is_no_database_file(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with SweepWrites().held(make_url(url)):
        pass
    assert list(tmp_path.iterdir()) == []
