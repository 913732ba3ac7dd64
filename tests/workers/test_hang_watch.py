"""Hang detection in the supervisor: per-rank progress, a derived or fixed timeout, one flag."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from worker_helpers import attempt_order, read_items, with_script

from tests.health.scripts import hanging_script
from workers.contract import run_layout
from workers.contract.protocol import EVENTS_STREAM, LOGS_STREAM
from workers.contract.spec import JobSpec
from workers.supervisor import hang_stacks
from workers.supervisor.attempt import Supervisor
from workers.supervisor.hang_watch import HangWatch, hang_message
from workers.supervisor.settings import SupervisorSettings


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_hung_before_the_first_step() -> None:
    clock = Clock()
    watch = HangWatch([0, 1], timeout=None, clock=clock)
    clock.now += 10_000
    assert watch.timeout() is None and watch.check([0, 1]) == []


def test_derived_timeout_is_ten_times_the_p99_gap_but_at_least_a_minute() -> None:
    clock = Clock()
    watch = HangWatch([0], timeout=None, clock=clock)
    for step in range(1, 11):
        watch.steps(0, [step])
        clock.now += 0.5
    assert watch.timeout() == 60.0
    for step in range(11, 21):
        watch.steps(0, [step])
        clock.now += 9.0
    assert watch.timeout() == pytest.approx(90.0)


def test_a_stuck_rank_is_flagged_once_with_its_step_and_phase_and_again_after_progress() -> None:
    clock = Clock()
    watch = HangWatch([0, 1], timeout=5.0, clock=clock)
    watch.steps(0, [1, 2])
    watch.steps(1, [1, 2, 3])
    watch.declare(1, phase="collective", dumps_stacks=True)
    clock.now += 4.9
    assert watch.check([0, 1]) == []
    clock.now += 0.2
    stuck = watch.check([0, 1])
    assert [(s.rank, s.step, s.phase) for s in stuck] == [(0, 2, None), (1, 3, "collective")]
    assert hang_message(stuck, 5.0).startswith("hung: no progress for 5 s")
    assert "rank 1 at step 3 in phase collective" in hang_message(stuck, 5.0)
    assert watch.check([0, 1]) == []  # flagged once
    assert watch.stacks_from([0, 1]) == [1]
    watch.steps(1, [4])
    clock.now += 6
    assert [s.rank for s in watch.check([0, 1])] == [0, 1]  # 1 moved, then stalled again
    assert watch.check([1]) == []


def test_an_exited_rank_is_not_stuck() -> None:
    clock = Clock()
    watch = HangWatch([0, 1], timeout=5.0, clock=clock)
    watch.steps(0, [1])
    clock.now += 100
    assert watch.check([1]) == []


@pytest.mark.slow
def test_a_hung_rank_is_flagged_its_stacks_dumped_and_on_hang_restart_ends_the_attempt(
    tmp_path: Path, supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    script = hanging_script(block_at=5)
    settings = with_script(supervisor_settings, tmp_path / "scripts", "hang.py", script)
    spec = JobSpec.model_validate(
        {
            "name": "hang",
            "entrypoint": {"script": "hang.py"},
            "parallelism": {"devices": 2},
            "health": {"hang_timeout_s": 5, "on_hang": "restart"},
        }
    )

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("hung: no progress for 5 s")
    assert outcome.reason.endswith("(on_hang: restart)")
    [event] = [e for e in read_items(redis_url, EVENTS_STREAM) if e["kind"] == "hung"]
    assert "rank 1 at step 5 in phase collective" in event["message"]
    assert "rank 0 at step 5 in phase collective" in event["message"]
    assert "stacks of ranks 0, 1 are in their stderr logs" in event["message"]
    stderr = "\n".join(
        line["line"]
        for line in read_items(redis_url, LOGS_STREAM)
        if line["rank"] == 1 and line["stream"] == "stderr"
    )
    assert "(most recent call first)" in stderr and "hang.py" in stderr  # faulthandler

    # each rank's stack, saved as a file of the attempt (service-owned log dir) and sent on
    logs = run_layout.log_dir(settings.data_dir, 1, 1)
    for rank in (0, 1):
        saved = hang_stacks.stack_file(logs, rank)
        text = saved.read_text()
        assert "Thread 0x" in text and 'File "' in text and "hang.py" in text, text
        assert saved.stat().st_uid == os.getuid() and saved.stat().st_mode & 0o007 == 0
        assert saved.stat().st_size <= hang_stacks.MAX_FILE_BYTES
    sent = [e for e in read_items(redis_url, EVENTS_STREAM) if e["kind"] == "hang_stack"]
    assert sorted(e["message"].split("\n", 1)[0] for e in sent) == ["rank 0", "rank 1"]
    assert all("(most recent call first)" in e["message"] and e["step"] == 5 for e in sent)
    assert "saved as hang-stacks/rank-<r>.txt" in event["message"]
