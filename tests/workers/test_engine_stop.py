"""When a rank alone is asked to stop (cancel, pause: SIGTERM), it saves and stops at the next
step, not at its next report: a report may be up to REPORT_EVERY steps away, and steps that
slow down after the last report (a loaded host) made that outlast the supervisor's grace,
which then killed the rank before its final checkpoint (the acceptance dry run's cancel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_helpers import mlp_spec

from workers.rank import sdk
from workers.rank.engine import report
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer

ASKED_AT = 30  # the step after which the stop arrives: mid-interval, far from a report


def test_a_single_rank_saves_and_stops_at_the_step_after_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # steps take "no time" against a long report period: every report is REPORT_EVERY apart
    monkeypatch.setattr(report, "REPORT_SECONDS", 1e9)
    spec = mlp_spec(hyperparameters={"steps": 10 * report.REPORT_EVERY})
    trainer = Trainer(
        spec, build_task("mlp", spec.hyperparameters), ParallelContext(), checkpoint_dir=tmp_path
    )
    # what the SIGTERM handler sets, once the rank has taken ASKED_AT steps
    monkeypatch.setattr(sdk, "should_stop", lambda: trainer.step >= ASKED_AT)
    result = trainer.run()
    assert result.stopped
    assert result.step == ASKED_AT + 1  # the next report would have been at REPORT_EVERY + 1
    assert result.last_checkpoint == tmp_path / f"step-{ASKED_AT + 1}"
    assert result.last_checkpoint.is_dir()
