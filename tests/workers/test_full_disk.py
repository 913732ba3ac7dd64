"""A full data disk never kills training: logs are dropped (and said so), checkpoints retried."""

from __future__ import annotations

import dataclasses
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_helpers import attempt_order, mlp_spec, read_items, wait_for

from tests.full_disk import fill, free_bytes, small_filesystem
from tests.job_users import reachable
from workers.contract.checkpoints import newest_checkpoint
from workers.contract.protocol import EVENTS_STREAM, LOGS_STREAM, METRICS_STREAM, AttemptOutcome
from workers.contract.run_layout import log_dir
from workers.contract.spec import JobSpec
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes

MIB = 1 << 20
#: an mlp whose checkpoints take about 1.7 MB each
WIDE = {"hidden": 256}

#: prints one long line a step; waits for the test to fill the disk at step 10, and for
#: space to return after step 30 (the gates are files the test creates)
PRINTING_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    gates = sys.argv[1]
    for step in range(1, 41):
        if step == 10:
            while not os.path.exists(os.path.join(gates, "full")):
                time.sleep(0.02)
        if step == 31:
            while not os.path.exists(os.path.join(gates, "free")):
                time.sleep(0.02)
        print(f"step {step}: train loss {1.0 / step:.5f} " + "x" * 1000, flush=True)
        time.sleep(0.01)
    """
)


@pytest.fixture
def small_data_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs for the node's data dir."""
    with small_filesystem(reachable(tmp_path) / "disk", size="16M") as disk:
        yield disk


def test_a_printing_job_keeps_running_through_a_full_disk_and_says_why_once(
    tmp_path: Path,
    small_data_disk: Path,
    supervisor_settings: SupervisorSettings,
    redis_url: str,
) -> None:
    scripts, gates = reachable(tmp_path / "scripts"), reachable(tmp_path / "gates")
    (scripts / "train.py").write_text(PRINTING_SCRIPT)
    spec = JobSpec.model_validate(
        {"name": "printer", "entrypoint": {"script": "train.py", "args": [str(gates)]}}
    )
    settings = dataclasses.replace(
        supervisor_settings,
        data_dir=reachable(small_data_disk / "data"),
        script_roots=[scripts.resolve()],
    )
    outcomes: list[AttemptOutcome] = []
    runner = threading.Thread(
        target=lambda: outcomes.append(Supervisor(attempt_order(spec), settings).run())
    )
    runner.start()
    stdout_log = log_dir(settings.data_dir, job_id=1, number=1) / "rank-0.stdout.log"
    wait_for(lambda: stdout_log.exists() and "step 9:" in stdout_log.read_text(), what="step 9")

    ballast = fill(small_data_disk)
    assert free_bytes(small_data_disk) == 0
    (gates / "full").touch()

    def printed() -> list[str]:
        return [i["line"] for i in read_items(redis_url, LOGS_STREAM) if i["stream"] == "stdout"]

    wait_for(lambda: any(line.startswith("step 30:") for line in printed()), what="step 30")
    assert runner.is_alive()  # the rank prints on, its lines reaching the board
    ballast.unlink()
    (gates / "free").touch()
    runner.join(timeout=60)

    assert outcomes and outcomes[0].outcome == "succeeded", outcomes
    steps = [int(line.split()[1][:-1]) for line in printed()]
    assert steps == list(range(1, 41))
    points = Counter(p["step"] for p in read_items(redis_url, METRICS_STREAM))
    assert points == Counter(range(1, 41))  # every printed loss became a point, once
    warnings = [
        e["message"] for e in read_items(redis_url, EVENTS_STREAM) if e["kind"] == "warning"
    ]
    assert warnings == ["logs not written to disk: no space on node test-node"]
    on_disk = stdout_log.read_text()
    assert "step 9:" in on_disk and "step 30:" not in on_disk
    assert "lines not written to disk]" in on_disk and "step 40:" in on_disk


def disk_events(redis_url: str) -> list[tuple[str, int, str]]:
    """The attempt's checkpoint and warning events: (kind, step, message)."""
    events = read_items(redis_url, EVENTS_STREAM)
    return [
        (e["kind"], e["step"], e["message"])
        for e in events
        if e["kind"] != "started" and not e["kind"].startswith("startup:")
    ]


def leave_free(ballast: Path, free: int) -> None:
    """Give `free` bytes of a filled filesystem back by shortening its ballast."""
    size = ballast.stat().st_size
    with ballast.open("r+b") as file:
        file.truncate(size - free)


def test_a_checkpoint_without_space_removes_its_partial_folder_and_the_next_one_saves(
    small_data_disk: Path,
) -> None:
    spec = mlp_spec(hyperparameters={"steps": 10, **WIDE})
    checkpoints = small_data_disk / "checkpoints"
    trainer = Trainer(
        spec, build_task("mlp", spec.hyperparameters), ParallelContext(), checkpoint_dir=checkpoints
    )
    trainer.train_step()
    first = trainer.save()
    assert first is not None and first.name == "step-1"
    ballast = fill(small_data_disk)
    leave_free(ballast, MIB)  # room for part of a checkpoint: its folder is really partial

    trainer.train_step()
    assert trainer.save() is None  # not raised: training goes on

    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-1"]
    assert newest_checkpoint(checkpoints) == first
    assert free_bytes(small_data_disk) >= MIB - 64 * 1024  # the partial shard's space is back
    ballast.unlink()
    trainer.train_step()
    third = trainer.save()
    assert third is not None and newest_checkpoint(checkpoints) == third
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-1", "step-3"]


def test_a_checkpointing_job_on_a_full_disk_warns_keeps_its_last_checkpoint_and_succeeds(
    small_data_disk: Path, supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    spec = mlp_spec(hyperparameters={"steps": 30, **WIDE}, checkpoint={"every_steps": 10})
    settings = dataclasses.replace(
        supervisor_settings, data_dir=reachable(small_data_disk / "data")
    )
    leave_free(fill(small_data_disk), 2 * MIB + MIB // 2)  # step-10 fits, step-20 does not

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    assert outcome.last_checkpoint is not None and outcome.last_checkpoint.endswith("step-10")
    events = disk_events(redis_url)
    assert [(kind, step) for kind, step, _ in events] == [
        ("checkpoint", 10),
        ("warning", 20),
        ("warning", 30),
    ]
    assert events[1][2].startswith("checkpoint step 20 not saved: no space left on device (")
    folders = Path(outcome.last_checkpoint).parent
    assert [p.name for p in folders.iterdir()] == ["step-10"]  # no partial .tmp-step-N-* left


def test_an_attempt_that_cannot_start_on_a_full_disk_says_so_as_a_platform_fault(
    small_data_disk: Path, supervisor_settings: SupervisorSettings
) -> None:
    settings = dataclasses.replace(
        supervisor_settings, data_dir=reachable(small_data_disk / "data")
    )
    fill(small_data_disk)

    outcome = Supervisor(attempt_order(mlp_spec()), settings).run()

    assert outcome.outcome == "failed" and outcome.platform_fault  # spends no max_restarts
    assert outcome.reason is not None
    assert outcome.reason.startswith("node test-node: no space left on device (0 MiB free); ")
    assert "supervisor error: OSError: [Errno 28] No space left on device" in outcome.reason


def test_an_mlp_job_on_a_full_disk_trains_to_the_end_with_every_point_stored_once(
    small_data_disk: Path, supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    spec = mlp_spec(devices=2, hyperparameters={"steps": 40})
    settings = dataclasses.replace(
        supervisor_settings, data_dir=reachable(small_data_disk / "data")
    )
    leave_free(fill(small_data_disk), 4096)  # the spec file's page, nothing for logs

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    points = Counter(
        (p["rank"], p["step"], p["name"]) for p in read_items(redis_url, METRICS_STREAM)
    )
    assert {(r, s) for r, s, n in points if n == "loss"} == {
        (r, s) for r in (0, 1) for s in range(1, 41)
    }
    assert set(points.values()) == {1}
    lines = [i["line"] for i in read_items(redis_url, LOGS_STREAM) if i["rank"] == 0]
    assert any(line.startswith("finished at step 40/40") for line in lines)  # shown live
    events = [(e["kind"], e["message"]) for e in read_items(redis_url, EVENTS_STREAM)]
    assert ("warning", "logs not written to disk: no space on node test-node") in events
    assert [m for k, m in events if k == "warning" and m.startswith("checkpoint step 40 not saved")]


def test_a_job_whose_policy_says_pause_stops_at_a_full_disk_naming_it(
    small_data_disk: Path, supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    checkpoint = {"every_steps": 10, "on_disk_full": "pause"}
    spec = mlp_spec(devices=2, hyperparameters={"steps": 30, **WIDE}, checkpoint=checkpoint)
    settings = dataclasses.replace(
        supervisor_settings, data_dir=reachable(small_data_disk / "data")
    )
    leave_free(fill(small_data_disk), 2 * MIB + MIB // 2)  # step-10 fits, step-20 does not

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert (outcome.outcome, outcome.pause, outcome.platform_fault) == ("stopped", True, False)
    assert outcome.reason is not None
    assert outcome.reason.startswith("no space left on node test-node (")
    assert outcome.reason.endswith(
        " MiB free): checkpoint step 20 not saved; paused at the last"
        " checkpoint (checkpoint.on_disk_full: pause)"
    )
    assert outcome.last_checkpoint is not None and outcome.last_checkpoint.endswith("step-10")
    assert [p.name for p in Path(outcome.last_checkpoint).parent.iterdir()] == ["step-10"]
    events = disk_events(redis_url)
    assert [(kind, step) for kind, step, _ in events] == [("checkpoint", 10), ("warning", 20)]
    assert events[1][2].endswith("the previous checkpoint stays the newest, pausing the job")
    points = {p["step"] for p in read_items(redis_url, METRICS_STREAM) if p["name"] == "loss"}
    assert max(points) == 20  # it stopped there, not trained on to 30
