"""A checkpoint refused for what it holds ends the attempt as final, with the reason, inert."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_helpers import attempt_order, mlp_spec

from tests.security.pickle_payloads import PAYLOADS
from workers.contract.rank_env import EXIT_FINAL
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes


def test_a_crafted_checkpoint_fails_the_attempt_final_with_the_refusal_and_runs_nothing(
    supervisor_settings: SupervisorSettings, tmp_path: Path
) -> None:
    spec = mlp_spec(devices=2, hyperparameters={"steps": 4}, checkpoint={"every_steps": 4})
    first = Supervisor(attempt_order(spec, job_id=1, number=1), supervisor_settings).run()
    assert first.outcome == "succeeded" and first.last_checkpoint is not None, first.reason
    marker = tmp_path / "ran"
    crafted = Path(first.last_checkpoint)
    (crafted / ".metadata").write_bytes(PAYLOADS["STACK_GLOBAL"](marker))

    order = attempt_order(spec, job_id=1, number=2, resume_from=str(crafted))
    outcome = Supervisor(order, supervisor_settings).run()

    assert outcome.outcome == "failed"
    assert EXIT_FINAL in outcome.exit_codes  # the backend fails the job, spending no restart
    assert outcome.reason == (
        "checkpoint refused: the checkpoint's .metadata is a pickle that names os.system, "
        "not one of DCP's metadata types"
    )
    assert not marker.exists()
